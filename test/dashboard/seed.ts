/**
 * A store with real data for the dashboard tests: an agent run through the LLM proxy (token ids
 * captured) against the mock LLM server, under Trainer.dev() with two in-process runners.
 *  - "chat" tasks: the openai SDK's chat API with a calculator tool (tool call, tool result, answer);
 *  - "react" tasks: the completions API, the agent appending the tool's observation to its own
 *    prompt, so the adapter merges both calls into one training row with observation tokens (mask 0);
 *  - a task whose agent throws (a failed rollout), queued validation rollouts, a rollout with no
 *    spans, and three resource versions (an LLM with an API key, a prompt template that changes).
 */
import {
  emitReward,
  instrumentOpenAI,
  type LightningStore,
  promptTemplate,
  proxyLLM,
  type RolloutContext,
  rollout,
  Trainer,
} from "@agl/core";
import { type MockRequestInfo, startMockLLMServer } from "@agl/core/mock-llm";
import OpenAI from "openai";
import { quietProxy } from "../support/quiet-proxy.js";

export interface SeedTask {
  style: "chat" | "react" | "crash";
  a: number;
  b: number;
}

export const SEED_API_KEY = "sk-seed-SECRET-123456";
export const CHAT_QUESTION = (t: SeedTask) => `What is ${t.a} + ${t.b}?`;
export const REACT_PROMPT = (t: SeedTask) => `Q: ${t.a}+${t.b}\n`;
export const REACT_OBSERVATION = (sum: number) => `\nOBS ${sum}\n`;

/** The mock model: asks for the calculator first, answers once it has the result. */
function respond(request: MockRequestInfo) {
  const body = request.body ?? {};
  if (Array.isArray(body.messages)) {
    const messages = body.messages as Array<{ role: string; content?: string }>;
    const tool = messages.find((m) => m.role === "tool");
    if (tool) return { content: `The answer is ${tool.content}.` };
    const q = /(\d+) \+ (\d+)/.exec(String(messages.at(-1)?.content ?? ""));
    return {
      content: "",
      tool_calls: [
        { name: "calculator", arguments: JSON.stringify({ a: Number(q?.[1]), b: Number(q?.[2]) }) },
      ],
    };
  }
  const prompt = String(body.prompt ?? "");
  const obs = /OBS (\d+)/.exec(prompt);
  if (obs) return { content: `ANSWER ${obs[1]}` };
  const q = /Q: (\d+)\+(\d+)/.exec(prompt);
  return { content: `CALC ${q?.[1]}+${q?.[2]}` };
}

const agent = rollout(async (task: SeedTask, { llm }: RolloutContext) => {
  if (!llm) throw new Error("no LLM resource");
  if (task.style === "crash") throw new Error(`agent crashed on ${task.a}+${task.b}`);
  const client = instrumentOpenAI(
    new OpenAI({ baseURL: llm.endpoint, apiKey: llm.api_key ?? "none", maxRetries: 0 }),
  );
  const sum = task.a + task.b;
  if (task.style === "chat") {
    const question = { role: "user" as const, content: CHAT_QUESTION(task) };
    const tools = [
      {
        type: "function" as const,
        function: { name: "calculator", description: "adds two numbers", parameters: { type: "object" } },
      },
    ];
    const first = await client.chat.completions.create({ model: llm.model, messages: [question], tools });
    const call = first.choices[0]!.message.tool_calls![0]! as { id: string; function: { arguments: string } };
    const args = JSON.parse(call.function.arguments) as { a: number; b: number };
    const second = await client.chat.completions.create({
      model: llm.model,
      messages: [
        question,
        first.choices[0]!.message,
        { role: "tool", tool_call_id: call.id, content: String(args.a + args.b) },
      ],
      tools,
    });
    emitReward(second.choices[0]!.message.content?.includes(String(sum)) ? 1 : 0);
    return;
  }
  let prompt = REACT_PROMPT(task);
  const first = await client.completions.create({ model: llm.model, prompt, max_tokens: 32 });
  prompt += first.choices[0]!.text + REACT_OBSERVATION(sum);
  const second = await client.completions.create({ model: llm.model, prompt, max_tokens: 32 });
  emitReward(second.choices[0]!.text.trim() === `ANSWER ${sum}` ? 1 : 0.25);
});

export const SEED_TASKS: SeedTask[] = [
  { style: "chat", a: 2, b: 3 },
  { style: "react", a: 4, b: 5 },
  { style: "chat", a: 10, b: 20 },
  { style: "react", a: 7, b: 8 },
  { style: "crash", a: 1, b: 1 },
];

export interface SeedSummary {
  agentRollouts: number;
  queuedRollouts: number;
  emptyRolloutId: string;
}

/** Fill `store` (any LightningStore) with the run above plus queued rollouts and resource versions. */
export async function seedStore(store: LightningStore, options: { queued: number }): Promise<SeedSummary> {
  const mock = await startMockLLMServer({ respond, alwaysReturnTokenIds: true });
  const proxy = quietProxy(store, mock.baseURL);
  const proxyUrl = await proxy.start();
  try {
    const trainer = new Trainer({
      store,
      initialResources: {
        main_llm: proxyLLM({ endpoint: proxyUrl, model: "policy", api_key: SEED_API_KEY }),
        system_prompt: promptTemplate("You are a calculator agent.\nAnswer briefly."),
      },
      nRunners: 2,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
    });
    await trainer.dev(agent, SEED_TASKS);
    await proxy.flush();
  } finally {
    await proxy.stop();
    await mock.close();
  }
  await store.addResources({
    main_llm: proxyLLM({ endpoint: "http://127.0.0.1:9/v1", model: "policy-v2", api_key: SEED_API_KEY }),
    system_prompt: promptTemplate(
      "You are a careful calculator agent.\nAnswer briefly.\nShow the tool result.",
    ),
  });
  await store.enqueueManyRollouts(
    Array.from({ length: options.queued }, (_, i) => ({
      input: { a: i, b: i },
      mode: "val" as const,
      metadata: { data_id: `sample-${i % 7}` },
    })),
  );
  const empty = await store.startRollout({ input: { note: "no spans" }, mode: "test" });
  await store.updateAttempt(empty.rollout_id, empty.attempt.attempt_id, { status: "succeeded" });
  return {
    agentRollouts: SEED_TASKS.length,
    queuedRollouts: options.queued,
    emptyRolloutId: empty.rollout_id,
  };
}
