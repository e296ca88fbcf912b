/**
 * Legacy task API claims live in the database (the rollout's config carries the task timeout), so
 * the store's watchdog requeues an unanswered claim even after the server that made it restarted,
 * and any server on the same database hands the task out again.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AgentLightningClient } from "@agl/client";
import { type AttemptedRollout, InMemoryLightningStore, type LightningStore } from "@agl/core";
import { until } from "@agl/core/testing";
import { PostgresLightningStore, SqliteLightningStore, type StoreServer } from "@agl/store";
import pg from "pg";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { legacyClaimConfig } from "../../packages/store/src/server/legacy.js";
import { createTestDatabase } from "../support/postgres.js";
import { serve } from "./support.js";

let dir: string;
const cleanups: Array<() => Promise<void>> = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "agl-legacy-"));
});
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
  rmSync(dir, { recursive: true, force: true });
});

async function open(path: string, taskTimeout: number) {
  return openOn(new SqliteLightningStore(path, { watchdogMaxSleepMs: 100 }), taskTimeout);
}

async function openOn(store: LightningStore, taskTimeout: number) {
  const server: StoreServer = await serve(store, { legacyTaskTimeoutSeconds: taskTimeout });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await server.close();
    await store.close();
  };
  cleanups.push(close);
  return { store, client: new AgentLightningClient({ url: server.url, pollIntervalMs: 50 }), close };
}

describe("legacy claims are kept in the store", () => {
  it("a claim made before a restart is still requeued after it", async () => {
    const path = join(dir, "agl.db");
    const first = await open(path, 0.5);
    const rollout = await first.store.enqueueRollout({ input: "task" });
    expect((await first.client.getTask())?.num_claims).toBe(1);
    await first.close();

    const second = await open(path, 0.5);
    expect(await second.client.getTask()).toBeNull();
    const again = await second.client.pollNextTask();
    expect(again).toMatchObject({ rollout_id: rollout.rollout_id, num_claims: 2 });
    const attempts = (await second.store.queryAttempts(rollout.rollout_id)).items;
    expect(attempts.map((a) => a.status)).toEqual(["timeout", "preparing"]);
  });

  it("two servers on one database: a claim made through one is requeued and handed out by the other", async () => {
    const path = join(dir, "shared.db");
    await sharedServers(await open(path, 0.4), await open(path, 0.4));
  });

  it("a late result for a requeued claim still counts, on a fresh attempt", async () => {
    const { store, client } = await open(join(dir, "late.db"), 0.3);
    const rollout = await store.enqueueRollout({ input: "task" });
    await client.getTask();
    await until(async () => (await store.getRolloutById(rollout.rollout_id))?.status === "requeuing");
    await client.postRollout({ rollout_id: rollout.rollout_id, final_reward: 0.5 });
    expect((await store.getRolloutById(rollout.rollout_id))?.status).toBe("succeeded");
    const attempts = (await store.queryAttempts(rollout.rollout_id)).items;
    expect(attempts.map((x) => x.status)).toEqual(["timeout", "succeeded"]);
    const spans = (await store.querySpans(rollout.rollout_id)).items;
    expect(spans.map((s) => s.attempt_id)).toEqual([attempts[1]!.attempt_id]);
    expect(await client.getTask()).toBeNull();
  });
});

/** Claim through `a`, never answer: `b` (another server, same database) hands the task out again. */
async function sharedServers(a: Awaited<ReturnType<typeof openOn>>, b: Awaited<ReturnType<typeof openOn>>) {
  const rollout = await a.store.enqueueRollout({ input: "task" });
  expect((await a.client.getTask())?.rollout_id).toBe(rollout.rollout_id);
  expect(await b.client.getTask()).toBeNull();
  const started = Date.now();
  const again = await b.client.pollNextTask();
  expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  expect(again).toMatchObject({ rollout_id: rollout.rollout_id, num_claims: 2 });
  // Timed out exactly once, although both servers' stores run the watchdog: wait for the second claim
  // to time out, then there must be exactly two attempts, both timed out.
  const settled = async () => (await a.store.queryAttempts(rollout.rollout_id)).items;
  await until(async () => (await settled()).every((x) => x.status === "timeout"));
  const attempts = await settled();
  expect(attempts.map((x) => x.status)).toEqual(["timeout", "timeout"]);
  expect((await a.client.getTask())?.num_claims).toBe(3);
}

describe("legacy claims on PostgreSQL", () => {
  const database = createTestDatabase();
  afterAll(async () => {
    await (await database).drop();
  });

  it("two servers on one database share the claims", async () => {
    const { url } = await database;
    const schema = `agl_legacy_${process.pid}`;
    const connect = () => PostgresLightningStore.connect(url, { schema, watchdogMaxSleepMs: 100 });
    cleanups.push(async () => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).finally(() => client.end());
    });
    await sharedServers(await openOn(await connect(), 0.4), await openOn(await connect(), 0.4));
  });
});

describe("legacyClaimConfig", () => {
  const claimed = async (config: Parameters<InMemoryLightningStore["enqueueRollout"]>[0]["config"]) => {
    const store = new InMemoryLightningStore();
    await store.enqueueRollout({ input: 1, config });
    const c = (await store.dequeueRollout()) as AttemptedRollout;
    await store.close();
    return c;
  };

  it("adds the task timeout, retries timeouts and leaves room for one more claim", async () => {
    expect(legacyClaimConfig(await claimed(undefined), 300)).toEqual({
      timeout_seconds: 300,
      unresponsive_seconds: null,
      max_attempts: 2,
      retry_condition: ["timeout"],
    });
  });

  it("keeps a shorter timeout and the rollout's own retry conditions; null when nothing changes", async () => {
    const own = await claimed({ timeout_seconds: 10, max_attempts: 5, retry_condition: ["failed"] });
    expect(legacyClaimConfig(own, 300)).toMatchObject({
      timeout_seconds: 10,
      max_attempts: 5,
      retry_condition: ["failed", "timeout"],
    });
    const done = await claimed({ timeout_seconds: 10, max_attempts: 5, retry_condition: ["timeout"] });
    expect(legacyClaimConfig(done, 300)).toBeNull();
  });
});
