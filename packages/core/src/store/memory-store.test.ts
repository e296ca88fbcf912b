import { spawnSync } from "node:child_process";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { InvalidArgumentError, StoreClosedError } from "@agl/core";
import {
  describeStoreConformance,
  describeStoreModel,
  expectError,
  makeSpan,
  sleep,
} from "@agl/core/testing";
import { afterEach, describe, expect, it, vi } from "vitest";
import { InMemoryLightningStore } from "./memory-store.js";

const factory = async () => ({ store: new InMemoryLightningStore() });

describeStoreConformance("InMemoryLightningStore", factory);
describeStoreModel("InMemoryLightningStore", factory, { numRuns: 100 });

describe("InMemoryLightningStore specifics", () => {
  const stores: InMemoryLightningStore[] = [];
  const open = (options?: ConstructorParameters<typeof InMemoryLightningStore>[0]) => {
    const store = new InMemoryLightningStore(options);
    stores.push(store);
    return store;
  };
  afterEach(async () => {
    vi.restoreAllMocks();
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });

  it("validates constructor options, naming the field", () => {
    let caught: unknown;
    try {
      new InMemoryLightningStore({ watchdog: "yes" } as any);
    } catch (error) {
      caught = error;
    }
    expect(InvalidArgumentError.isInstance(caught)).toBe(true);
    expect((caught as InvalidArgumentError).field).toBe("options.watchdog");
    expect(() => new InMemoryLightningStore({ pollMs: 10 } as any)).toThrow(/options/);
  });

  it("with watchdog: false, deadlines are only enforced when the store is called", async () => {
    const store = open({ watchdog: false });
    const r = await store.startRollout({ input: 1, config: { timeout_seconds: 0.1 } });
    // Nothing fires on its own...
    expect(await store.waitForRollouts([r.rollout_id], { timeoutSeconds: 0.4 })).toEqual([]);
    // ...but the next call applies the overdue verdict before answering.
    expect((await store.getLatestAttempt(r.rollout_id))?.status).toBe("timeout");
    expect((await store.getRolloutById(r.rollout_id))?.status).toBe("failed");
  });

  it("arms one timer for the earliest deadline instead of polling", async () => {
    const spy = vi.spyOn(globalThis, "setTimeout");
    const store = open();
    for (let i = 0; i < 100; i++) await store.startRollout({ input: i, config: { timeout_seconds: 30 + i } });
    // Later deadlines never displace the earliest, so one timer covers them all.
    expect(spy.mock.calls.length).toBeLessThanOrEqual(2);
    expect((await store.statistics()).watchdog_deadlines).toBe(100);
    spy.mockClear();
    await delay(250); // node:timers/promises does not go through the spied global
    expect(spy.mock.calls.length).toBe(0);
    // An earlier deadline re-targets the timer, and finishing a rollout drops its deadline.
    const soon = await store.startRollout({ input: "soon", config: { timeout_seconds: 0.2 } });
    expect(spy.mock.calls.length).toBe(1);
    await store.updateAttempt(soon.rollout_id, "latest", { status: "succeeded" });
    expect((await store.statistics()).watchdog_deadlines).toBe(100);
  });

  it("its timer does not keep the process alive", () => {
    const entry = fileURLToPath(new URL("./memory-store.ts", import.meta.url));
    const script = `
      const { InMemoryLightningStore } = await import(${JSON.stringify(entry)});
      const store = new InMemoryLightningStore();
      await store.startRollout({ input: 1, config: { timeout_seconds: 600 } });
      console.log("started");
    `;
    const started = Date.now();
    const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(child.stderr).toBe("");
    expect(child.stdout.trim()).toBe("started");
    expect(child.status).toBe(0);
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it("close rejects pending waiters and clears deadlines", async () => {
    const store = open();
    const r = await store.startRollout({ input: 1, config: { timeout_seconds: 60 } });
    const waiting = store.waitForRollouts([r.rollout_id], { timeoutSeconds: null });
    await sleep(10);
    await store.close();
    await expectError(waiting, StoreClosedError);
    await expectError(store.statistics(), StoreClosedError);
  });

  it("keeps heap bookkeeping bounded under many heartbeats", async () => {
    const store = open();
    const r = await store.startRollout({ input: 1, config: { unresponsive_seconds: 30 } });
    for (let i = 0; i < 5000; i++) {
      await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, {
        last_heartbeat_time: Date.now() / 1000 + i,
      });
    }
    expect((await store.statistics()).watchdog_deadlines).toBe(1);
    expect((await store.getLatestAttempt(r.rollout_id))?.status).toBe("running");
  });

  it("a span on an attempt of a finished rollout keeps the rollout's outcome", async () => {
    const store = open();
    const r = await store.startRollout({ input: 1 });
    await store.updateRollout(r.rollout_id, { status: "cancelled" });
    // A late success from the worker is recorded on the attempt but cannot resurrect the rollout.
    await store.addSpan(makeSpan(r.attempt, 1));
    const attempt = await store.updateAttempt(r.rollout_id, "latest", { status: "succeeded" });
    expect(attempt.status).toBe("succeeded");
    expect((await store.getRolloutById(r.rollout_id))?.status).toBe("cancelled");
  });
});
