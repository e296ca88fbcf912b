/**
 * Writing your own adapter. A small calculator agent (real `openai` SDK, traced by instrumentOpenAI,
 * against the mock vLLM server) runs under `trainer.dev()`. Its spans are then turned into training
 * data by a pipeline that mixes the built-in adapters with two written here:
 *
 *   - `ToolUseStats`, a class implementing `DiagnosingAdapter<Span[], ToolUseStats>` from scratch;
 *   - `shapeRewards`, made with `defineAdapter`: it rewards tool use and explains what it changed.
 *
 * and `pipe`/`groupBy` compose them per rollout. The diagnostics of every stage come back together.
 */
import {
  type AdapterResult,
  type DiagnosingAdapter,
  DiagnosticsCollector,
  defineAdapter,
  groupBy,
  pipe,
  readLlmCall,
  TraceToTriplets,
  TripletsToTrajectories,
  visualizeSpans,
} from "@agl/adapter";
import {
  emitReward,
  instrumentOpenAI,
  llm,
  type RolloutContext,
  rollout,
  type Span,
  Trainer,
  type Triplet,
} from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import OpenAI from "openai";

interface Task {
  a: number;
  b: number;
}

const TOOLS = [
  {
    type: "function" as const,
    function: {
      name: "add",
      description: "Add two integers",
      parameters: {
        type: "object",
        properties: { a: { type: "integer" }, b: { type: "integer" } },
        required: ["a", "b"],
      },
    },
  },
];

/** Ask, run the tool the model calls, send the result back, and reward a correct final answer. */
const agent = rollout(async (task: Task, { llm }: RolloutContext) => {
  if (!llm) throw new Error("needs an LLM resource");
  const client = instrumentOpenAI(new OpenAI({ baseURL: llm.endpoint, apiKey: "none", maxRetries: 0 }));
  const messages: any[] = [{ role: "user", content: `What is ${task.a}+${task.b}?` }];
  const extra = { return_token_ids: true, logprobs: true } as object;
  for (let turn = 0; turn < 3; turn++) {
    const reply = await client.chat.completions.create({
      model: llm.model,
      messages,
      tools: TOOLS,
      ...extra,
    });
    const message = reply.choices[0]!.message;
    messages.push(message);
    const call = message.tool_calls?.[0];
    if (call?.type !== "function") {
      emitReward(message.content?.includes(String(task.a + task.b)) ? 1 : 0);
      return;
    }
    const args = JSON.parse(call.function.arguments) as Task;
    messages.push({ role: "tool", tool_call_id: call.id, content: String(args.a + args.b) });
  }
  emitReward(0);
});

/** Per-rollout tool-use statistics: a hand-written adapter implementing the interface directly. */
interface ToolUseStats {
  llmCalls: number;
  toolCalls: number;
  tools: string[];
}

class ToolUseStatsAdapter implements DiagnosingAdapter<Span[], ToolUseStats> {
  readonly name = "ToolUseStats";

  adapt(spans: Span[]): ToolUseStats {
    return this.adaptWithDiagnostics(spans).output;
  }

  adaptWithDiagnostics(spans: Span[]): AdapterResult<ToolUseStats> {
    const diagnostics = new DiagnosticsCollector();
    const stats: ToolUseStats = { llmCalls: 0, toolCalls: 0, tools: [] };
    for (const span of spans) {
      const call = readLlmCall(span); // any instrumentation's attributes, normalised
      if (!call) continue;
      stats.llmCalls++;
      for (const message of call.output) {
        for (const toolCall of message.tool_calls ?? []) {
          stats.toolCalls++;
          if (!stats.tools.includes(toolCall.function.name)) stats.tools.push(toolCall.function.name);
        }
      }
    }
    if (stats.llmCalls === 0) diagnostics.add("no_llm_span_matched", "error", "no LLM call in this rollout");
    return { output: stats, diagnostics: diagnostics.report() };
  }
}

/** Reward shaping with `defineAdapter`: +0.1 for each call that used a tool, reported as a diagnostic. */
const shapeRewards = defineAdapter("shapeRewards", (triplets: Triplet[], ctx) =>
  triplets.map((t) => {
    const usedTool = JSON.stringify(t.response.raw_content).includes("tool_calls");
    if (!usedTool) return t;
    ctx.diagnostics.add("message_conversion", "info", `bonus for tool use on ${t.metadata.response_id}`);
    return { ...t, reward: (t.reward ?? 0) + 0.1 };
  }),
);

async function main(): Promise<void> {
  const server = await startMockLLMServer({
    respond: (request) => {
      const messages: any[] = request.body?.messages ?? [];
      const tool = messages.findLast((m) => m.role === "tool");
      if (tool) return { content: `The answer is ${tool.content}.` };
      const [, a, b] = /(\d+)\+(\d+)/.exec(String(messages[0]?.content)) ?? [];
      return {
        content: null,
        tool_calls: [{ name: "add", arguments: JSON.stringify({ a: Number(a), b: Number(b) }) }],
      };
    },
  });
  try {
    const trainer = new Trainer({
      nRunners: 2,
      initialResources: { main_llm: llm({ endpoint: server.baseURL, model: "mock-model" }) },
    });
    const tasks: Task[] = [
      { a: 2, b: 3 },
      { a: 10, b: 32 },
      { a: 7, b: 8 },
    ];
    const { result } = await trainer.dev(agent, tasks);
    const spans: Span[] = [];
    for (const r of (result as { rollouts: Array<{ rolloutId: string }> }).rollouts) {
      spans.push(...(await trainer.store.querySpans(r.rolloutId)).items);
    }

    // Built-in and custom adapters, composed per rollout.
    const perRollout = groupBy(
      (s: Span) => s.rollout_id,
      pipe(new TraceToTriplets(), shapeRewards, new TripletsToTrajectories()),
    );
    const { output: rows, diagnostics } = perRollout.adaptWithDiagnostics(spans);
    const stats = groupBy((s: Span) => s.rollout_id, new ToolUseStatsAdapter()).adapt(spans);

    for (const [rolloutId, sequences] of rows) {
      const s = stats.get(rolloutId)!;
      console.log(`${rolloutId}: ${s.llmCalls} LLM calls, ${s.toolCalls} tool calls (${s.tools.join(", ")})`);
      for (const seq of sequences) {
        const generated = seq.response_mask.filter((m) => m === 1).length;
        console.log(
          `  row: ${seq.prompt_token_ids.length} prompt + ${seq.response_token_ids.length} response tokens (${generated} generated), reward ${seq.reward}`,
        );
      }
    }
    console.log(`\ndiagnostics:\n${diagnostics.summary()}`);
    const firstRollout = [...rows.keys()][0]!;
    console.log(
      `\ntrace of ${firstRollout}:\n${visualizeSpans(spans.filter((s) => s.rollout_id === firstRollout))}`,
    );
  } finally {
    await server.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
