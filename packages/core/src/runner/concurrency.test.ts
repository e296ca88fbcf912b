import OpenAI from "openai";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { RolloutContext } from "../agent/types.js";
import { emitReward } from "../emitters/reward.js";
import { findFinalReward } from "../emitters/reward-reader.js";
import { instrumentOpenAI } from "../instrument/openai.js";
import { silentLogger } from "../logger.js";
import { type MockLLMServer, mockDecode, startMockLLMServer } from "../mock-llm/index.js";
import { Baseline, type BaselineSummary } from "../trainer/baseline.js";
import { Trainer } from "../trainer/trainer.js";
import { llm } from "../types/resources.js";

let server: MockLLMServer;
beforeAll(async () => {
  server = await startMockLLMServer({ delayMs: 10, chunkDelayMs: 1 });
});
afterAll(async () => server.close());

const N = 200;
const BARRIER_TIMEOUT_MS = 20_000;

it(`runs ${N} rollouts at once in one process without attributing any span to the wrong rollout`, async () => {
  const trainer = new Trainer({
    nRunners: 2,
    runnerConcurrency: N / 2,
    algorithm: new Baseline({ maxQueueLength: N, pollIntervalMs: 50 }),
    initialResources: { main: llm({ endpoint: server.baseURL, model: "mock-model", api_key: "k" }) },
    logger: silentLogger,
  });
  // One shared client for every rollout: attribution must come from the async context, not the client.
  const openai = instrumentOpenAI(new OpenAI({ baseURL: server.baseURL, apiKey: "k", maxRetries: 0 }));
  // A barrier that opens only once all N agents are inside at the same time: if the runners ran fewer
  // at once, the agents time out and fail (the test fails instead of hanging).
  let inside = 0;
  let peak = 0;
  let openBarrier: () => void = () => {};
  const barrier = new Promise<void>((resolve) => {
    openBarrier = resolve;
  });
  const waitAtBarrier = async () => {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`barrier timeout: only ${peak} of ${N} rollouts were in flight at once`)),
        BARRIER_TIMEOUT_MS,
      );
    });
    try {
      await Promise.race([barrier, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  };
  const agent = async (task: { id: number }, { llm }: RolloutContext) => {
    inside++;
    peak = Math.max(peak, inside);
    if (inside === N) openBarrier();
    await waitAtBarrier();
    await new Promise((r) => setTimeout(r, Math.random() * 20));
    const first = await openai.chat.completions.create({
      model: llm!.model,
      messages: [{ role: "user", content: `task ${task.id}` }],
      ...({ return_token_ids: true } as object),
    });
    await new Promise((r) => setTimeout(r, Math.random() * 20));
    const stream = await openai.chat.completions.create({
      model: llm!.model,
      stream: true,
      messages: [{ role: "user", content: `again ${task.id}: ${first.choices[0]!.message.content}` }],
      ...({ return_token_ids: true } as object),
    });
    for await (const _ of stream);
    emitReward(task.id);
    inside--;
  };
  const tasks = Array.from({ length: N }, (_, id) => ({ id }));
  const { result } = await trainer.dev<{ id: number }, BaselineSummary>(agent, tasks);

  expect(result.failed).toBe(0);
  expect(result.succeeded).toBe(N);
  expect(peak).toBe(N);
  const seenSpanIds = new Set<string>();
  for (const report of result.rollouts) {
    const id = (report.input as { id: number }).id;
    expect(report.reward).toBe(id);
    const spans = (await trainer.store.querySpans(report.rolloutId)).items;
    const llmSpans = spans.filter((s) => s.name === "openai.chat.completion");
    expect(llmSpans).toHaveLength(2);
    // Two LLM calls and a reward, all children of the attempt's agent.rollout span: one trace per rollout.
    expect(spans).toHaveLength(4);
    const root = spans.find((s) => s.name === "agent.rollout")!;
    for (const s of spans) expect(s.trace_id).toBe(root.trace_id);
    expect(findFinalReward(spans)).toBe(id);
    const [a, b] = llmSpans.map((s) => s.attributes);
    expect(a!["gen_ai.prompt.0.content"]).toBe(`task ${id}`);
    expect(a!["gen_ai.completion.0.content"]).toBe(`Echo: task ${id}`);
    expect(mockDecode(a!.response_token_ids as number[])).toBe(`Echo: task ${id}`);
    expect(b!["gen_ai.prompt.0.content"]).toBe(`again ${id}: Echo: task ${id}`);
    expect(b!["gen_ai.completion.0.content"]).toBe(`Echo: again ${id}: Echo: task ${id}`);
    expect(spans.map((s) => s.sequence_id)).toEqual([1, 2, 3, 4]);
    for (const s of spans) {
      expect(s.rollout_id).toBe(report.rolloutId);
      expect(s.resource.attributes["agentlightning.rollout_id"]).toBe(report.rolloutId);
      expect(seenSpanIds.has(s.span_id)).toBe(false);
      seenSpanIds.add(s.span_id);
    }
  }
  expect(seenSpanIds.size).toBe(4 * N);
  expect((await trainer.store.statistics()).total_spans).toBe(4 * N);
});
