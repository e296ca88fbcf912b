import { describe, expect, it } from "vitest";
import type { Logger } from "../logger.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import { Trainer } from "../trainer/trainer.js";
import { Runner } from "./runner.js";

function recording(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const push = (m: string, ...d: unknown[]) => void lines.push([m, ...d.map(String)].join(" "));
  return { lines, logger: { debug() {}, info: push, warn: push, error: push } };
}

class HttpLikeError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

describe("runner: store failures while claiming", () => {
  it("a failing dequeue is one line per try with the next delay, then recovers", async () => {
    const store = new InMemoryLightningStore();
    await store.addResources({});
    await store.enqueueRollout({ input: 1 });
    let failures = 2;
    const dequeue = store.dequeueRollout.bind(store);
    store.dequeueRollout = async (options) => {
      if (failures-- > 0)
        throw new HttpLikeError("connect ECONNREFUSED 127.0.0.1:4747\n    at internal frames", 0);
      return dequeue(options);
    };
    const { logger, lines } = recording();
    const summary = await new Runner({
      store,
      agent: async () => 1,
      maxRollouts: 1,
      pollIntervalMs: 1,
      logger,
    }).run();
    expect(summary.succeeded).toBe(1);
    const failed = lines.filter((l) => l.includes("dequeue failed"));
    expect(failed).toEqual([
      expect.stringMatching(
        /\(try 1\): connect ECONNREFUSED 127\.0\.0\.1:4747 at internal frames; retrying in 0\.5 s$/,
      ),
      expect.stringMatching(/\(try 2\): .*retrying in 1 s$/),
    ]);
    expect(lines.some((l) => l.includes("dequeue works again after 2 failed tries"))).toBe(true);
    await store.close();
  });

  it("a 401 stops the runner instead of retrying forever", async () => {
    const store = new InMemoryLightningStore();
    let calls = 0;
    store.dequeueRollout = async () => {
      calls++;
      throw new HttpLikeError("POST /queues/rollouts/dequeue → 401: Invalid bearer token", 401);
    };
    const { logger } = recording();
    await expect(
      new Runner({ store, agent: async () => 1, pollIntervalMs: 1, logger }).run(),
    ).rejects.toThrow(/401/);
    expect(calls).toBe(1);
    await store.close();
  });
});

describe("a missing LLM resource", () => {
  it("is named with the fix instead of surfacing only as 'reading endpoint of undefined'", async () => {
    const { logger, lines } = recording();
    const trainer = new Trainer({ logger, devReport: false });
    const { result } = await trainer.dev(async (_t: number, { llm }) => llm!.endpoint, [1]);
    expect(result.failed).toBe(1);
    expect(lines.some((l) => l.includes("no LLM resource") && l.includes("initialResources"))).toBe(true);
  });
});
