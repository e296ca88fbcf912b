import { describe, expect, it } from "vitest";
import { emitMessage } from "../emitters/emit.js";
import { silentLogger } from "../logger.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import { ROLLOUT_SPAN_NAME } from "./rollout-span.js";
import { Runner } from "./runner.js";

describe("agent.rollout: one enclosing span per attempt", () => {
  it("every span of an attempt shares the trace of its agent.rollout span, the returned reward included", async () => {
    const store = new InMemoryLightningStore();
    await store.addResources({});
    const ok = await store.enqueueRollout({ input: 1, mode: "train" });
    const bad = await store.enqueueRollout({ input: 2 });
    const agent = async (task: number) => {
      emitMessage(`working on ${task}`);
      if (task === 2) throw new Error("no");
      return 0.5;
    };
    await new Runner({ store, agent, maxRollouts: 2, pollIntervalMs: 5, logger: silentLogger }).run();
    const traces = new Set<string>();
    for (const r of [ok, bad]) {
      const spans = (await store.querySpans(r.rollout_id)).items;
      const roots = spans.filter((s) => s.name === ROLLOUT_SPAN_NAME);
      expect(roots).toHaveLength(1);
      const root = roots[0]!;
      expect(root.parent_id).toBeNull();
      expect(root.attributes).toMatchObject({
        "agentlightning.rollout_id": r.rollout_id,
        "agentlightning.attempt_sequence_id": 1,
      });
      expect(spans.length).toBeGreaterThan(2);
      for (const s of spans) {
        expect(s.trace_id).toBe(root.trace_id);
        if (s !== root) expect(s.parent_id).toBe(root.span_id);
      }
      traces.add(root.trace_id);
    }
    expect(traces.size).toBe(2);
    const failedRoot = (await store.querySpans(bad.rollout_id)).items.find(
      (s) => s.name === ROLLOUT_SPAN_NAME,
    )!;
    expect(failedRoot.status.status_code).toBe("ERROR");
    await store.close();
  });
});
