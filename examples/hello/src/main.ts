/**
 * Hello, Agent Lightning: a tiny greeting agent that calls an OpenAI-compatible server through the real
 * `openai` SDK (traced by instrumentOpenAI), is rewarded for greeting in the requested language, and runs
 * under `trainer.dev()`. The "LLM" is the mock server shipped with @agl/core, on loopback, so this runs
 * anywhere with no API key.
 */
import {
  type BaselineSummary,
  emitReward,
  formatPromptTemplate,
  instrumentOpenAI,
  llm,
  promptTemplate,
  type RolloutContext,
  rollout,
  Trainer,
} from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import OpenAI from "openai";

interface Task {
  name: string;
  /** The greeting word the reply must contain. */
  greeting: string;
}

const tasks: Task[] = [
  { name: "Ada", greeting: "Hello" },
  { name: "Linus", greeting: "Hello" },
  { name: "Grace", greeting: "Bonjour" },
  { name: "Alan", greeting: "Hello" },
];

const agent = rollout(async (task: Task, { llm, promptTemplate }: RolloutContext) => {
  if (!llm || !promptTemplate) throw new Error("the hello agent needs an LLM and a prompt template");
  const client = instrumentOpenAI(
    new OpenAI({ baseURL: llm.endpoint, apiKey: llm.api_key ?? "none", maxRetries: 1 }),
  );
  const reply = await client.chat.completions.create({
    model: llm.model,
    messages: [{ role: "user", content: formatPromptTemplate(promptTemplate, { name: task.name }) }],
    temperature: 0.7,
    // vLLM's extension: token ids come back for training.
    ...({ return_token_ids: true } as object),
  });
  const text = reply.choices[0]?.message.content ?? "";
  emitReward(
    { correct: text.includes(task.greeting) ? 1 : 0, brevity: text.length <= 40 ? 1 : 0 },
    { primaryKey: "correct" },
  );
});

async function main(): Promise<void> {
  // The mock model always greets in English.
  const server = await startMockLLMServer({
    respond: (request) => {
      const prompt = String(request.body?.messages?.at(-1)?.content ?? "");
      const name = /to (\w+)/.exec(prompt)?.[1] ?? "there";
      return { content: `Hello, ${name}!` };
    },
  });
  try {
    const trainer = new Trainer({
      nRunners: 2,
      initialResources: {
        main_llm: llm({ endpoint: server.baseURL, model: "mock-model" }),
        greeting_prompt: promptTemplate("Say hello to {name}."),
      },
    });
    const { result } = await trainer.dev(agent, tasks);
    printSummary(result);
    console.log(`LLM calls served: ${server.requests.length}`);
  } finally {
    await server.close();
  }
}

function printSummary(summary: BaselineSummary): void {
  const rows = summary.rollouts.map((r) => [
    r.rolloutId,
    (r.input as Task).name,
    (r.input as Task).greeting,
    r.status,
    r.reward === null ? "-" : r.reward.toFixed(2),
    String(r.spanCount),
  ]);
  const header = ["rollout", "name", "greeting", "status", "reward", "spans"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  console.log(line(header));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const row of rows) console.log(line(row));
  const mean = summary.meanReward === null ? "-" : summary.meanReward.toFixed(3);
  console.log(
    `rollouts: ${summary.rollouts.length}  succeeded: ${summary.succeeded}  failed: ${summary.failed}  mean reward: ${mean}`,
  );
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
