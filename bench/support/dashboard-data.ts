/**
 * A large SQLite store for the dashboard bench, written through the public LightningStore API:
 * N rollouts (train/val, several statuses, data ids), each with S spans shaped like a real agent
 * run — an agent span, LLM-call spans with messages and token ids, tool spans, and a reward.
 */
import type { LightningStore, SpanInput } from "@agl/core";

const BATCH = 1000;

function spansFor(rolloutId: string, attemptId: string, count: number, t0: number, r: number): SpanInput[] {
  const trace = rolloutId.slice(3).padEnd(32, "0");
  const root = `${rolloutId.slice(3, 15)}0000`;
  const spans: SpanInput[] = [
    {
      rollout_id: rolloutId,
      attempt_id: attemptId,
      sequence_id: 1,
      trace_id: trace,
      span_id: root,
      parent_id: null,
      name: "agent.run",
      start_time: t0,
      end_time: t0 + 2,
      attributes: { "agent.name": "calc" },
    },
  ];
  const calls = Math.max(1, Math.floor((count - 2) / 2));
  for (let i = 0; i < count - 2; i++) {
    const isCall = i < calls;
    const start = t0 + 0.1 + i * 0.15;
    const prompt = Array.from({ length: 24 }, (_, k) => 1000 + ((k * 7 + i) % 90));
    spans.push({
      rollout_id: rolloutId,
      attempt_id: attemptId,
      sequence_id: 2 + i,
      trace_id: trace,
      span_id: `${rolloutId.slice(3, 15)}${String(i + 1).padStart(4, "0")}`,
      parent_id: root,
      name: isCall ? "openai.chat.completion" : "tool.calculator",
      start_time: start,
      end_time: start + 0.1,
      attributes: isCall
        ? {
            "gen_ai.request.model": "policy",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": `What is ${i} + ${r}?`,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": `The answer is ${i + r}.`,
            "gen_ai.response.id": `resp-${rolloutId}-${i}`,
            "gen_ai.usage.prompt_tokens": prompt.length,
            "gen_ai.usage.completion_tokens": 8,
            prompt_token_ids: prompt,
            response_token_ids: [1084, 1104, 1101, 1032, 1097, 1110, 1115, 1119],
          }
        : { "tool.name": "calculator", "tool.parameters": `{"a":${i},"b":${r}}` },
    });
  }
  spans.push({
    rollout_id: rolloutId,
    attempt_id: attemptId,
    sequence_id: count,
    trace_id: trace,
    span_id: `${rolloutId.slice(3, 15)}9999`,
    parent_id: root,
    name: "agentlightning.annotation",
    start_time: t0 + 1.9,
    end_time: t0 + 1.9,
    attributes: { "agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": r % 2 },
  });
  return spans;
}

/** Fill `store` with `rollouts` rollouts of `spansPerRollout` spans each; returns one rollout id to open. */
export async function fillStore(
  store: LightningStore,
  rollouts: number,
  spansPerRollout: number,
  onProgress: (done: number) => void = () => {},
): Promise<string> {
  let sample = "";
  for (let done = 0; done < rollouts; done += BATCH) {
    const n = Math.min(BATCH, rollouts - done);
    await store.enqueueManyRollouts(
      Array.from({ length: n }, (_, i) => ({
        input: { a: done + i, b: (done + i) % 97 },
        mode: (done + i) % 10 === 0 ? ("val" as const) : ("train" as const),
        metadata: { data_id: `sample-${(done + i) % 5000}` },
      })),
    );
    const claimed = await store.dequeueManyRollouts({ limit: n, workerId: `Worker-${(done / BATCH) % 8}` });
    const t0 = Date.now() / 1000 - rollouts + done;
    await store.addManySpans(
      claimed.flatMap((r, i) =>
        spansFor(r.rollout_id, r.attempt.attempt_id, spansPerRollout, t0 + i, done + i),
      ),
    );
    for (const [i, r] of claimed.entries()) {
      // most succeed, some fail, the last batch keeps running
      if (done + n >= rollouts && i % 2 === 0) continue;
      await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, {
        status: i % 13 === 0 ? "failed" : "succeeded",
      });
    }
    if (!sample) sample = claimed[1]!.rollout_id;
    onProgress(done + n);
  }
  return sample;
}
