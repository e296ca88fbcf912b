import { afterEach, describe, expect, it } from "vitest";
import type { RolloutContext } from "../agent/types.js";
import { type Logger, silentLogger } from "../logger.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import { Runner, type RunnerOptions } from "./runner.js";

let store: InMemoryLightningStore;
afterEach(async () => store?.close());

const never = () => new Promise<never>(() => {});

function runner(options: Omit<RunnerOptions, "store">) {
  return new Runner({ store, pollIntervalMs: 5, logger: silentLogger, ...options });
}

function recordingLogger(lines: string[]): Logger {
  const push = (m: string) => void lines.push(m);
  return { debug() {}, info: push, warn: push, error: push };
}

describe("attempt deadlines bite", () => {
  it("a timed-out attempt aborts the agent's signal and frees the only slot for the next task", async () => {
    store = new InMemoryLightningStore();
    await store.addResources({});
    const hung = await store.enqueueRollout({ input: "hang", config: { timeout_seconds: 0.1 } });
    const next = await store.enqueueRollout({ input: "ok" });
    const signals: AbortSignal[] = [];
    const logs: string[] = [];
    const summary = await runner({
      concurrency: 1,
      maxRollouts: 2,
      gracePeriodMs: 50,
      logger: recordingLogger(logs),
      // The first agent ignores its signal entirely: only abandoning it frees the slot.
      agent: async (task: string, { signal }: RolloutContext) => {
        signals.push(signal);
        if (task === "hang") await never();
        return 1;
      },
    }).run();
    // The summary counts the agent it logged as abandoned (it said `abandoned: 0` before).
    expect(summary).toMatchObject({ claimed: 2, succeeded: 1, stale: 1, abandoned: 1 });
    expect(signals[0]!.aborted).toBe(true);
    expect(String(signals[0]!.reason?.message)).toContain("timeout");
    expect((await store.getLatestAttempt(hung.rollout_id))!.status).toBe("timeout");
    expect((await store.getRolloutById(next.rollout_id))!.status).toBe("succeeded");
    expect(logs.some((l) => l.includes("ignored its abort signal"))).toBe(true);
  });

  it("cancelling a rollout aborts its running agent at the next heartbeat", async () => {
    store = new InMemoryLightningStore();
    await store.addResources({});
    const r = await store.enqueueRollout({ input: 1 });
    let reason: unknown;
    const run = runner({
      maxRollouts: 1,
      heartbeatIntervalSeconds: 0.02,
      agent: async (_t: unknown, { signal }: RolloutContext) => {
        await store.updateRollout(r.rollout_id, { status: "cancelled" });
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        reason = signal.reason;
      },
    }).run();
    const summary = await run;
    expect(summary).toMatchObject({ claimed: 1, stale: 1, succeeded: 0, abandoned: 0 });
    expect(String((reason as Error).message)).toContain("cancelled");
    expect((await store.getRolloutById(r.rollout_id))!.status).toBe("cancelled");
  });

  it("defaultTimeoutSeconds gives rollouts without a timeout a deadline", async () => {
    store = new InMemoryLightningStore();
    await store.addResources({});
    const r = await store.enqueueRollout({ input: 1 });
    const summary = await runner({
      maxRollouts: 1,
      defaultTimeoutSeconds: 0.05,
      agent: async (_t: unknown, { signal }: RolloutContext) => {
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        throw signal.reason;
      },
    }).run();
    expect(summary).toMatchObject({ stale: 1 });
    expect((await store.getLatestAttempt(r.rollout_id))!.status).toBe("timeout");
  });
});
