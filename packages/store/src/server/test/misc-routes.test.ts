import { InMemoryLightningStore } from "@agl/core";
import { makeSpan } from "@agl/core/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Harness, harness } from "./helpers.js";

const API = "/v1/agl";
const llm = { resource_type: "llm", endpoint: "http://llm/v1", model: "m" };

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.close();
});

describe("health and statistics", () => {
  it("health is {status: ok}; statistics is a dict of counts", async () => {
    const health = await h.call("GET", `${API}/health`);
    expect(health).toMatchObject({ status: 200, body: { status: "ok" } });
    // @agl/client trusts hot-route answers (shape check instead of a full parse) only with this mark.
    expect(health.headers.get("x-agl-server")).toBe("agl-ts");
    await h.call("POST", `${API}/rollouts`, { input: 1 });
    const stats = await h.call("GET", `${API}/statistics`);
    expect(stats.body).toMatchObject({ total_rollouts: 1, total_attempts: 1 });
  });

  it("unknown /v1 paths are 404; metrics, logs and profiles are 501", async () => {
    expect((await h.call("GET", "/v1/agl/nope")).status).toBe(404);
    expect((await h.call("GET", "/v1/whatever")).status).toBe(404);
    for (const path of ["/v1/metrics", "/v1/logs", "/v1/development/profiles"]) {
      expect((await h.call("POST", path, "", { "content-type": "application/x-protobuf" })).status).toBe(501);
    }
  });
});

describe("resources", () => {
  it("POST /resources is 201 with a full ResourcesUpdate; latest, by id, upsert, query", async () => {
    const added = await h.call("POST", `${API}/resources`, { main: llm });
    expect(added.status).toBe(201);
    expect(Object.keys(added.body).sort()).toEqual([
      "create_time",
      "resources",
      "resources_id",
      "update_time",
      "version",
    ]);
    expect(added.body.resources.main).toEqual({ ...llm, api_key: null, sampling_parameters: {} });
    expect(added.body.version).toBe(1);
    expect((await h.call("GET", `${API}/resources/latest`)).body.resources_id).toBe(added.body.resources_id);
    expect((await h.call("GET", `${API}/resources/${added.body.resources_id}`)).body).toEqual(added.body);
    expect(await h.call("GET", `${API}/resources/rs-missing`)).toMatchObject({ status: 200, body: null });

    const upd = await h.call("POST", `${API}/resources/${added.body.resources_id}`, {
      prompt: { resource_type: "prompt_template", template: "Hi {name}" },
    });
    expect(upd.status).toBe(200);
    expect(upd.body).toMatchObject({ version: 2, resources: { prompt: { engine: "f-string" } } });
    const created = await h.call("POST", `${API}/resources/rs-custom`, { main: llm });
    expect(created.body).toMatchObject({ resources_id: "rs-custom", version: 1 });
    expect((await h.call("GET", `${API}/resources/latest`)).body.resources_id).toBe("rs-custom");

    const all = await h.call("GET", `${API}/resources?resources_id_contains=custom`);
    expect(all.body).toMatchObject({ total: 1, limit: -1, offset: 0 });
    expect((await h.call("GET", `${API}/resources?sort_by=bogus`)).status).toBe(400);
    const bad = await h.call("POST", `${API}/resources`, { main: { resource_type: "llm", model: "m" } });
    expect(bad.status).toBe(422);
    expect(bad.body.field).toBe("main.endpoint");
  });

  it("latest is null before any resources", async () => {
    expect(await h.call("GET", `${API}/resources/latest`)).toMatchObject({ status: 200, body: null });
  });
});

describe("spans", () => {
  async function attempt() {
    return (await h.call("POST", `${API}/rollouts`, { input: 1 })).body.attempt;
  }
  const span = (a: any, seq: number, extra: Record<string, unknown> = {}) => ({
    rollout_id: a.rollout_id,
    attempt_id: a.attempt_id,
    sequence_id: seq,
    trace_id: "a".repeat(32),
    span_id: `${seq}`.padStart(16, "0"),
    parent_id: null,
    name: `s${seq}`,
    ...extra,
  });

  it("POST /spans is 201 with the stored span (unknown keys kept); a duplicate is 201 null", async () => {
    const a = await attempt();
    const res = await h.call("POST", `${API}/spans`, span(a, 1, { custom_key: { x: 1 } }));
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      name: "s1",
      custom_key: { x: 1 },
      status: { status_code: "UNSET" },
      events: [],
    });
    const dup = await h.call("POST", `${API}/spans`, span(a, 1));
    expect(dup).toMatchObject({ status: 201, body: null });
    const missing = await h.call("POST", `${API}/spans`, { ...span(a, 2), rollout_id: "ro-nope" });
    expect(missing.status).toBe(404);
    const invalid = await h.call("POST", `${API}/spans`, { ...span(a, 2), sequence_id: "x" });
    expect(invalid.status).toBe(422);
    expect(invalid.body.field).toBe("sequence_id");
  });

  it("sequence ids: /spans/next per rollout, the batch route gives consecutive values", async () => {
    const a = await attempt();
    const next = await h.call("POST", `${API}/spans/next`, {
      rollout_id: a.rollout_id,
      attempt_id: a.attempt_id,
    });
    expect(next).toMatchObject({ status: 200, body: { sequence_id: 1 } });
    const batch = await h.call("POST", `${API}/spans/next/batch`, {
      pairs: [
        { rollout_id: a.rollout_id, attempt_id: a.attempt_id },
        { rollout_id: a.rollout_id, attempt_id: a.attempt_id },
        { rollout_id: "ro-other", attempt_id: "at-x" },
      ],
    });
    expect(batch.body).toEqual({ sequence_ids: [2, 3, 1] });
    expect((await h.call("POST", `${API}/spans/next`, { rollout_id: a.rollout_id })).status).toBe(422);
  });

  it("batch insert, then GET and POST search agree; rollout_id is required; latest attempt", async () => {
    const a = await attempt();
    const stored = await h.call("POST", `${API}/spans/batch`, {
      spans: [span(a, 1), span(a, 2), span(a, 3, { name: "other" })],
    });
    expect(stored.status).toBe(201);
    expect(stored.body).toHaveLength(3);
    const q = `rollout_id=${a.rollout_id}&attempt_id=latest&name_contains=s&sort_order=desc`;
    const viaGet = await h.call("GET", `${API}/spans?${q}`);
    const viaPost = await h.call("POST", `${API}/spans/search`, Object.fromEntries(new URLSearchParams(q)));
    expect(viaGet.body).toEqual(viaPost.body);
    expect(viaGet.body.items.map((s: any) => s.sequence_id)).toEqual([2, 1]);
    const missing = await h.call("GET", `${API}/spans`);
    expect(missing.status).toBe(422);
    expect(missing.body.field).toBe("rollout_id");
    expect((await h.call("GET", `${API}/spans?rollout_id=${a.rollout_id}&sort_by=zzz`)).status).toBe(400);
  });

  it("spans evicted by a memory store answer 410 SpansEvictedError", async () => {
    const evicting = await harness({
      store: new InMemoryLightningStore({ spanEviction: { maxSpans: 1, safeRatio: 1 } }),
    });
    try {
      const old = await evicting.store.startRollout({ input: 1 });
      await evicting.store.addSpan(makeSpan(old.attempt, 1));
      await evicting.store.updateAttempt(old.rollout_id, "latest", { status: "succeeded" });
      const next = await evicting.store.startRollout({ input: 2 });
      await evicting.store.addSpan(makeSpan(next.attempt, 1)); // 2 > 1: the finished rollout's span goes
      const res = await evicting.call("GET", `${API}/spans?rollout_id=${old.rollout_id}`);
      expect(res).toMatchObject({ status: 410, body: { error_type: "SpansEvictedError" } });
      expect((await evicting.call("GET", `${API}/spans?rollout_id=${next.rollout_id}`)).body.total).toBe(1);
    } finally {
      await evicting.close();
    }
  });
});

describe("workers", () => {
  it("heartbeat upserts; null stats → 400; get, search and 200 null on a miss", async () => {
    const res = await h.call("POST", `${API}/workers/w-1`, { heartbeat_stats: { cpu: 0.5 } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ worker_id: "w-1", status: "unknown", heartbeat_stats: { cpu: 0.5 } });
    expect(res.body.last_heartbeat_time).toBeGreaterThan(0);
    expect((await h.call("POST", `${API}/workers/w-2`)).body.worker_id).toBe("w-2");
    const nullStats = await h.call("POST", `${API}/workers/w-1`, { heartbeat_stats: null });
    expect(nullStats.status).toBe(400);
    expect(nullStats.body.field).toBe("heartbeat_stats");
    expect((await h.call("GET", `${API}/workers/w-1`)).body.heartbeat_stats).toEqual({ cpu: 0.5 });
    expect(await h.call("GET", `${API}/workers/w-none`)).toMatchObject({ status: 200, body: null });
    await h.call("POST", `${API}/queues/rollouts/dequeue`, { worker_id: "w-2" });
    const viaGet = await h.call("GET", `${API}/workers?status_in=idle&status_in=busy&limit=5`);
    const viaPost = await h.call("POST", `${API}/workers/search`, { status_in: ["idle", "busy"], limit: 5 });
    expect(viaGet.body).toEqual(viaPost.body);
    expect(viaGet.body.items.map((w: any) => w.worker_id)).toEqual(["w-2"]);
    expect((await h.call("GET", `${API}/workers?worker_id_contains=w-&limit=1`)).body).toMatchObject({
      total: 2,
      limit: 1,
    });
  });
});
