import {
  emitAnnotation,
  emitReward,
  InvalidArgumentError,
  type LightningStore,
  llm,
  type RolloutQuery,
  rollout,
  type SpanInput,
  silentLogger,
} from "@agl/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpError, RemoteInvalidArgumentError } from "./http/errors.js";
import { LightningStoreClient } from "./store-client.js";
import { type PythonStoreServer, startPythonStoreServer } from "./test-support/python-agl/index.js";
import { Worker } from "./worker.js";

/**
 * agl-ts's client and worker against a stand-in of Python Agent Lightning's store server, which
 * answers only what that server answers (see test-support/python-agl): nothing here may depend on
 * agl-ts-only headers, fields or routes.
 */

let server: PythonStoreServer;
const post = async (path: string, body: unknown) => {
  const res = await fetch(`${server.url}/v1/agl/${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json(), agl: res.headers.get("x-agl-server") };
};
const client = (opts: { retries?: boolean } = {}) =>
  new LightningStoreClient({
    url: server.url,
    token: "ignored-by-python",
    ...(opts.retries === false
      ? { retryDelaysMs: [] }
      : { retryDelaysMs: [10, 10, 10], healthRetryDelaysMs: [5] }),
  });

beforeAll(async () => {
  server = await startPythonStoreServer();
});
afterAll(async () => {
  await server.close();
});

describe("the stand-in answers as the Python store server does", () => {
  it("validation, null guards, store errors, misses and unknown routes", async () => {
    const missing = await post("queues/rollouts/enqueue", { items: [] });
    expect(missing.status).toBe(422);
    expect(missing.body.detail[0]).toMatchObject({ loc: ["body", "rollouts"], msg: "Field required" });
    expect((await post("queues/rollouts/enqueue", { rollouts: [{ mode: "train" }] })).status).toBe(422);
    const [made] = (await post("queues/rollouts/enqueue", { rollouts: [{ input: 1, colour: "red" }] })).body;
    expect(made).not.toHaveProperty("colour");
    expect(Object.keys(made).sort()).toEqual(
      [
        "config",
        "end_time",
        "input",
        "metadata",
        "mode",
        "resources_id",
        "rollout_id",
        "start_time",
        "status",
      ].sort(),
    );
    expect((await post(`rollouts/${made.rollout_id}`, { status: null })).status).toBe(400);
    const unknown = await post("rollouts/ro-nope", { status: "failed" });
    expect(unknown.status).toBe(500);
    expect(unknown.body).toMatchObject({ detail: "Internal server error", error_type: "ValueError" });
    expect(await (await fetch(`${server.url}/v1/agl/rollouts/ro-nope`)).json()).toBeNull();
    const batch = await post("spans/batch", { spans: [] });
    expect([batch.status, batch.body]).toEqual([405, { detail: "Method Not Allowed" }]);
    expect(batch.agl).toBeNull();
    const span = await post("spans", {
      rollout_id: made.rollout_id,
      attempt_id: "a",
      sequence_id: 1,
      name: "x",
    });
    expect(span.status).toBe(422);
  });
});

describe("LightningStoreClient against Python Agent Lightning", () => {
  it("says which server it talks to", async () => {
    const c = client();
    const info = await c.serverInfo();
    expect(info.kind).toBe("agentlightning");
    expect(info.storeName).toBe("InMemoryLightningStore");
    expect(info.description).toMatch(/not agl-ts/);
    await c.close();
  });

  it("refuses the agl-ts mode / data-id filters, which the Python server would ignore", async () => {
    const c = client();
    await c.enqueueRollout({ input: 1, mode: "train", metadata: { data_id: "x" } });
    const cases: Array<[RolloutQuery, string]> = [
      [{ modeIn: ["val"] }, "modeIn"],
      [{ dataIdIn: ["y"] }, "dataIdIn"],
      [{ dataIdContains: "y" }, "dataIdContains"],
    ];
    for (const [query, field] of cases) {
      const error = await c.queryRollouts(query).catch((e: unknown) => e);
      expect(InvalidArgumentError.isInstance(error), field).toBe(true);
      expect((error as InvalidArgumentError).field).toBe(field);
    }
    expect((await c.queryRollouts({ statusIn: ["queuing"] })).total).toBeGreaterThan(0);
    await c.close();
  });

  it("span batches fall back to one request each, learning once that the route is missing", async () => {
    const c = client();
    const [claim] = await (async () => {
      await c.enqueueManyRollouts([{ input: { q: 1 } }]);
      return c.dequeueManyRollouts({ limit: 1, workerId: "w" });
    })();
    const rid = claim!.rollout_id;
    const aid = claim!.attempt.attempt_id;
    const seqs = await c.getManySpanSequenceIds([
      [rid, aid],
      [rid, aid],
    ]);
    expect(seqs).toEqual([1, 2]);
    const span = (seq: number, id: string): SpanInput => ({
      rollout_id: rid,
      attempt_id: aid,
      sequence_id: seq,
      trace_id: "0".repeat(32),
      span_id: id.padStart(16, "0"),
      name: "step",
      attributes: { k: seq },
    });
    const before = server.log.length;
    expect(await c.addManySpans([span(1, "a"), span(2, "b")])).toHaveLength(2);
    expect(await c.addManySpans([span(3, "c")])).toHaveLength(1);
    const used = server.log.slice(before).map((l) => `${l.method} ${l.path} ${l.status}`);
    expect(used).toEqual(["POST /v1/agl/spans 201", "POST /v1/agl/spans 201", "POST /v1/agl/spans 201"]);
    const stored = await c.querySpans(rid, { attemptId: "latest" });
    expect(stored.items.map((s) => s.attributes.k)).toEqual([1, 2, 3]);
    await c.close();
  });

  it("errors keep their meaning: a 422 names the field, a store error is a 500 ValueError, a miss is null", async () => {
    const c = client({ retries: false });
    expect(await c.getRolloutById("ro-missing")).toBeNull();
    expect(await c.getLatestAttempt("ro-missing")).toBeNull();
    const error = await c.updateRollout("ro-missing", { status: "failed" }).catch((e) => e);
    expect(HttpError.isInstance(error) && [error.status, error.errorType]).toEqual([500, "ValueError"]);
    const invalid = await c.enqueueManyRollouts([{ input: 1, mode: "bogus" as never }]).catch((e) => e);
    expect(RemoteInvalidArgumentError.isInstance(invalid)).toBe(true);
    expect((invalid as RemoteInvalidArgumentError).field).toBe("rollouts.0.mode");
    await c.close();
  });

  it("waits end when every rollout is finished, and at the deadline otherwise, without agl-ts's wait header", async () => {
    const c = client();
    await c.enqueueManyRollouts([{ input: "a" }, { input: "b" }]);
    const [a, b] = await c.dequeueManyRollouts({ limit: 2, workerId: "w" });
    const finish = (r: typeof a, status: "succeeded" | "failed") =>
      setTimeout(() => void c.updateAttempt(r!.rollout_id, r!.attempt.attempt_id, { status }), 100);
    finish(a, "succeeded");
    const t0 = Date.now();
    const one = await c.waitForRollouts([a!.rollout_id, b!.rollout_id], { timeoutSeconds: 1.5 });
    expect(one.map((r) => r.rollout_id)).toEqual([a!.rollout_id]);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
    finish(b, "failed");
    const t1 = Date.now();
    const both = await c.waitForRollouts([a!.rollout_id, b!.rollout_id], { timeoutSeconds: 20 });
    expect(both).toHaveLength(2);
    expect(Date.now() - t1).toBeLessThan(10_000);
    await c.close();
  });
});

describe("a Worker (the runner) against Python Agent Lightning", () => {
  it("claims, runs a traced agent and records spans and rewards that the Python models accept", async () => {
    // A server of its own: the queue must hold only this test's rollouts.
    await server.close();
    server = await startPythonStoreServer();
    const store: LightningStore = server.store;
    await store.addResources({ main_llm: llm({ endpoint: "http://unused/v1", model: "m" }) });
    const ids = (
      await store.enqueueManyRollouts([0, 1, 2, 3].map((n) => ({ input: { n }, mode: "train" as const })))
    ).map((r) => r.rollout_id);
    const agent = rollout<{ n: number }>(async (task) => {
      emitAnnotation({ note: `task ${task.n}`, nested: { depth: 2 } });
      if (task.n === 3) throw new Error("agent failure is recorded too");
      emitReward({ primary: task.n / 2, extra: 1 }, { primaryKey: "primary" });
    });
    const worker = new Worker({
      store: server.url,
      agent,
      concurrency: 2,
      workerId: "ts-worker",
      pollIntervalMs: 20,
      maxRollouts: 4,
      handleSignals: false,
      logger: silentLogger,
    });
    expect((await worker.describeServer())?.kind).toBe("agentlightning");
    const before = server.log.length;
    const summary = await worker.run();
    expect(summary).toMatchObject({ claimed: 4, succeeded: 3, failed: 1 });
    // No request the worker made was refused as malformed (except the probe for batch routes).
    const refused = server.log
      .slice(before)
      .filter((l) => l.status >= 400 && !(l.path.endsWith("/batch") && l.status === 405));
    expect(refused).toEqual([]);
    for (const [i, rid] of ids.entries()) {
      const r = await store.getRolloutById(rid);
      expect(r!.status).toBe(i === 3 ? "failed" : "succeeded");
      const spans = (await store.querySpans(rid, { attemptId: "latest" })).items;
      expect(
        spans.some((s) => s.name === "agentlightning.annotation" && s.attributes.note === `task ${i}`),
      ).toBe(true);
      if (i < 3) {
        const reward = spans.find((s) => s.attributes["agentlightning.reward.0.name"] === "primary");
        expect(reward?.attributes["agentlightning.reward.0.value"]).toBe(i / 2);
      } else {
        expect(spans.some((s) => s.name === "agentlightning.exception")).toBe(true);
      }
    }
    expect((await store.getWorkerById("ts-worker"))?.heartbeat_stats).not.toBeNull();
  });
});
