import { MAX_ENQUEUE_BATCH } from "@agl/core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Harness, harness } from "./helpers.js";

const API = "/v1/agl";
const ROLLOUT_KEYS = [
  "config",
  "end_time",
  "input",
  "metadata",
  "mode",
  "resources_id",
  "rollout_id",
  "start_time",
  "status",
];
const ATTEMPT_KEYS = [
  "attempt_id",
  "end_time",
  "last_heartbeat_time",
  "metadata",
  "rollout_id",
  "sequence_id",
  "start_time",
  "status",
  "worker_id",
];

let h: Harness;
beforeEach(async () => {
  h = await harness();
});
afterEach(async () => {
  await h.close();
});

describe("queue routes", () => {
  it("enqueue answers 201 with full Rollout objects in order", async () => {
    const res = await h.call("POST", `${API}/queues/rollouts/enqueue`, {
      rollouts: [
        { input: { q: 1 } },
        { input: "two", mode: "val", metadata: { k: "v" }, config: { max_attempts: 2 } },
      ],
    });
    expect(res.status).toBe(201);
    expect(res.body).toHaveLength(2);
    expect(Object.keys(res.body[0]).sort()).toEqual(ROLLOUT_KEYS);
    expect(res.body[0]).toMatchObject({
      input: { q: 1 },
      status: "queuing",
      mode: null,
      end_time: null,
      metadata: {},
    });
    expect(res.body[1]).toMatchObject({
      input: "two",
      mode: "val",
      metadata: { k: "v" },
      config: { max_attempts: 2, retry_condition: [], timeout_seconds: null, unresponsive_seconds: null },
    });
  });

  it("enqueue without the rollouts key, or with a bad field, is 422 naming the field", async () => {
    const missing = await h.call("POST", `${API}/queues/rollouts/enqueue`, {});
    expect(missing.status).toBe(422);
    expect(missing.body).toMatchObject({ error_type: "ValidationError", field: "rollouts" });
    const bad = await h.call("POST", `${API}/queues/rollouts/enqueue`, {
      rollouts: [{ input: 1, mode: "bogus" }],
    });
    expect(bad.status).toBe(422);
    expect(bad.body.field).toBe("rollouts[0].mode");
    const notJson = await h.call("POST", `${API}/queues/rollouts/enqueue`, "{nope");
    expect(notJson.status).toBe(422);
  });

  it("an enqueue batch is limited by count: MAX_ENQUEUE_BATCH + 1 rollouts is a 422 naming rollouts, nothing enqueued", async () => {
    const over = await h.call("POST", `${API}/queues/rollouts/enqueue`, {
      rollouts: Array.from({ length: 20_001 }, (_, i) => ({ input: i })),
    });
    expect(over.status).toBe(422);
    expect(over.body).toMatchObject({ error_type: "ValidationError", field: "rollouts" });
    expect(over.body.detail).toContain(String(MAX_ENQUEUE_BATCH));
    const justOver = await h.call("POST", `${API}/queues/rollouts/enqueue`, {
      rollouts: Array.from({ length: MAX_ENQUEUE_BATCH + 1 }, () => ({ input: 1 })),
    });
    expect(justOver.status).toBe(422);
    expect((await h.store.statistics()).total_rollouts).toBe(0);
    const full = await h.call("POST", `${API}/queues/rollouts/enqueue`, {
      rollouts: Array.from({ length: MAX_ENQUEUE_BATCH }, () => ({ input: 1 })),
    });
    expect(full.status).toBe(201);
    expect(full.body).toHaveLength(MAX_ENQUEUE_BATCH);
  });

  it("dequeue returns a list of AttemptedRollouts; empty body, empty queue and limit <= 0 give []", async () => {
    expect((await h.call("POST", `${API}/queues/rollouts/dequeue`)).body).toEqual([]);
    await h.call("POST", `${API}/queues/rollouts/enqueue`, {
      rollouts: [{ input: 1 }, { input: 2 }, { input: 3 }],
    });
    expect((await h.call("POST", `${API}/queues/rollouts/dequeue`, { limit: 0 })).body).toEqual([]);
    expect((await h.call("POST", `${API}/queues/rollouts/dequeue`, { limit: -3 })).body).toEqual([]);
    const one = await h.call("POST", `${API}/queues/rollouts/dequeue`);
    expect(one.status).toBe(200);
    expect(one.body).toHaveLength(1);
    expect(Object.keys(one.body[0]).sort()).toEqual([...ROLLOUT_KEYS, "attempt"].sort());
    expect(Object.keys(one.body[0].attempt).sort()).toEqual(ATTEMPT_KEYS);
    expect(one.body[0]).toMatchObject({
      input: 1,
      status: "preparing",
      attempt: { sequence_id: 1, worker_id: null },
    });
    const two = await h.call("POST", `${API}/queues/rollouts/dequeue`, { limit: 5, worker_id: "w-7" });
    expect(two.body.map((r: any) => r.input)).toEqual([2, 3]);
    expect(two.body.every((r: any) => r.attempt.worker_id === "w-7")).toBe(true);
  });
});

describe("rollout routes", () => {
  it("POST /rollouts is 201 with an AttemptedRollout; explicit nulls are accepted", async () => {
    const res = await h.call("POST", `${API}/rollouts`, {
      input: "x",
      mode: null,
      resources_id: null,
      config: null,
      metadata: null,
      worker_id: "w1",
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      status: "preparing",
      attempt: { sequence_id: 1, status: "preparing", worker_id: "w1" },
    });
  });

  it("GET /rollouts/{id} answers the item with its attempt, or 200 null", async () => {
    const started = (await h.call("POST", `${API}/rollouts`, { input: 1 })).body;
    const got = await h.call("GET", `${API}/rollouts/${started.rollout_id}`);
    expect(got.status).toBe(200);
    expect(got.body.attempt.attempt_id).toBe(started.attempt.attempt_id);
    const miss = await h.call("GET", `${API}/rollouts/ro-doesnotexist`);
    expect(miss.status).toBe(200);
    expect(miss.body).toBeNull();
  });

  it("POST /rollouts/{id} sets present keys; null status/config → 400; unknown id → 404; illegal → 409", async () => {
    const r = (
      await h.call("POST", `${API}/queues/rollouts/enqueue`, { rollouts: [{ input: 1, metadata: { a: 1 } }] })
    ).body[0];
    const upd = await h.call("POST", `${API}/rollouts/${r.rollout_id}`, { mode: "train", metadata: null });
    expect(upd.status).toBe(200);
    expect(upd.body).toMatchObject({ mode: "train", metadata: null, input: 1, status: "queuing" });
    const unset = await h.call("POST", `${API}/rollouts/${r.rollout_id}`, { resources_id: "rs-1" });
    expect(unset.body).toMatchObject({ mode: "train", resources_id: "rs-1" });
    for (const key of ["status", "config"]) {
      const res = await h.call("POST", `${API}/rollouts/${r.rollout_id}`, { [key]: null });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ field: key, error_type: "InvalidArgumentError" });
    }
    const nf = await h.call("POST", `${API}/rollouts/ro-nothere`, { mode: "val" });
    expect(nf.status).toBe(404);
    expect(nf.body).toMatchObject({ error_type: "NotFoundError", field: "rollout_id" });
    expect(nf.body.detail).toContain("ro-nothere");
    await h.call("POST", `${API}/rollouts/${r.rollout_id}`, { status: "cancelled" });
    const illegal = await h.call("POST", `${API}/rollouts/${r.rollout_id}`, { status: "succeeded" });
    expect(illegal.status).toBe(409);
    expect(illegal.body).toMatchObject({ error_type: "IllegalTransitionError", field: "status" });
    const badType = await h.call("POST", `${API}/rollouts/${r.rollout_id}`, { status: "nope" });
    expect(badType.status).toBe(422);
    expect(badType.body.field).toBe("status");
  });

  it("GET and POST search agree; repeated params and JSON arrays; guards are 400", async () => {
    const made = (
      await h.call("POST", `${API}/queues/rollouts/enqueue`, {
        rollouts: [{ input: 1 }, { input: 2 }, { input: 3 }],
      })
    ).body;
    await h.call("POST", `${API}/queues/rollouts/dequeue`);
    const ids = made.map((r: any) => r.rollout_id);
    const qs = `status_in=queuing&status_in=preparing&rollout_id_in=${ids[0]}&rollout_id_in=${ids[2]}&sort_by=input&sort_order=desc&limit=-1`;
    const viaGet = await h.call("GET", `${API}/rollouts?${qs}`);
    const viaPost = await h.call("POST", `${API}/rollouts/search`, {
      status_in: ["queuing", "preparing"],
      rollout_id_in: [ids[0], ids[2]],
      sort_by: "input",
      sort_order: "desc",
      limit: -1,
    });
    expect(viaGet.status).toBe(200);
    expect(viaGet.body).toEqual(viaPost.body);
    expect(viaGet.body).toMatchObject({ limit: -1, offset: 0, total: 2 });
    expect(viaGet.body.items.map((r: any) => r.rollout_id)).toEqual([ids[2], ids[0]]);
    expect(viaGet.body.items[1].attempt.sequence_id).toBe(1);
    expect(viaGet.body.items[0].attempt).toBeUndefined();

    const or = await h.call("POST", `${API}/rollouts/search`, {
      status_in: ["preparing"],
      rollout_id_contains: ids[2].slice(3),
      filter_logic: "or",
    });
    expect(or.body.total).toBe(2);
    const page = await h.call("GET", `${API}/rollouts?limit=1&offset=1`);
    expect(page.body).toMatchObject({ limit: 1, offset: 1, total: 3 });
    expect(page.body.items).toHaveLength(1);

    for (const [qs2, field] of [
      ["sort_by=not_a_field", "sort_by"],
      ["sort_by=status&sort_order=sideways", "sort_order"],
      ["limit=0", "limit"],
      ["limit=-2", "limit"],
      ["offset=-1", "offset"],
      ["filter_logic=xor", "filter_logic"],
    ] as const) {
      const res = await h.call("GET", `${API}/rollouts?${qs2}`);
      expect(res.status, qs2).toBe(400);
      expect(res.body.field).toBe(field);
      const post = await h.call(
        "POST",
        `${API}/rollouts/search`,
        Object.fromEntries(new URLSearchParams(qs2)),
      );
      expect(post.status, `POST ${qs2}`).toBe(400);
    }
    expect((await h.call("GET", `${API}/rollouts?limit=abc`)).status).toBe(422);
    expect((await h.call("GET", `${API}/rollouts?status_in=bogus`)).status).toBe(422);
  });

  it("agl-ts extension: mode_in / data_id_in / data_id_contains on GET and POST search", async () => {
    const made = (
      await h.call("POST", `${API}/queues/rollouts/enqueue`, {
        rollouts: [
          { input: 1, mode: "train", metadata: { data_id: "q-1" } },
          { input: 2, mode: "val", metadata: { data_id: "q-2" } },
          { input: 3, mode: "val", metadata: { data_id: "other" } },
          { input: 4, mode: "test" },
        ],
      })
    ).body;
    const ids = made.map((r: any) => r.rollout_id);
    const viaGet = await h.call(
      "GET",
      `${API}/rollouts?mode_in=val&mode_in=train&data_id_contains=q-&limit=1`,
    );
    const viaPost = await h.call("POST", `${API}/rollouts/search`, {
      mode_in: ["val", "train"],
      data_id_contains: "q-",
      limit: 1,
    });
    expect(viaGet.status).toBe(200);
    expect(viaGet.body).toEqual(viaPost.body);
    expect(viaGet.body).toMatchObject({ limit: 1, offset: 0, total: 2 });
    expect(viaGet.body.items.map((r: any) => r.rollout_id)).toEqual([ids[0]]);
    const byId = await h.call("GET", `${API}/rollouts?data_id_in=other&data_id_in=q-2`);
    expect(byId.body.items.map((r: any) => r.rollout_id)).toEqual([ids[1], ids[2]]);
    const bad = await h.call("GET", `${API}/rollouts?mode_in=training`);
    expect(bad.status).toBe(422);
    expect(JSON.stringify(bad.body)).toContain("mode_in");
  });
});

describe("attempt routes", () => {
  it("start attempt is 201; list/search/latest; update with 'latest' and explicit-null guard", async () => {
    const r = (await h.call("POST", `${API}/rollouts`, { input: 1 })).body;
    const second = await h.call("POST", `${API}/rollouts/${r.rollout_id}/attempts`, { worker_id: "w2" });
    expect(second.status).toBe(201);
    expect(second.body.attempt).toMatchObject({ sequence_id: 2, worker_id: "w2" });
    const noBody = await h.call("POST", `${API}/rollouts/${r.rollout_id}/attempts`);
    expect(noBody.status).toBe(201);

    const list = await h.call("GET", `${API}/rollouts/${r.rollout_id}/attempts?sort_order=desc&limit=2`);
    const search = await h.call("POST", `${API}/rollouts/${r.rollout_id}/attempts/search`, {
      sort_order: "desc",
      limit: 2,
    });
    expect(list.body).toEqual(search.body);
    expect(list.body.total).toBe(3);
    expect(list.body.items.map((a: any) => a.sequence_id)).toEqual([3, 2]);
    const latest = await h.call("GET", `${API}/rollouts/${r.rollout_id}/attempts/latest`);
    expect(latest.body.sequence_id).toBe(3);
    expect((await h.call("GET", `${API}/rollouts/ro-unknown/attempts/latest`)).body).toBeNull();
    expect((await h.call("GET", `${API}/rollouts/ro-unknown/attempts`)).body).toMatchObject({
      items: [],
      total: 0,
    });

    const upd = await h.call("POST", `${API}/rollouts/${r.rollout_id}/attempts/latest`, {
      status: "running",
      metadata: { note: 1 },
    });
    expect(upd.status).toBe(200);
    expect(upd.body).toMatchObject({ sequence_id: 3, status: "running", metadata: { note: 1 } });
    for (const key of ["status", "worker_id", "last_heartbeat_time", "metadata"]) {
      const res = await h.call("POST", `${API}/rollouts/${r.rollout_id}/attempts/latest`, { [key]: null });
      expect(res.status, key).toBe(400);
      expect(res.body.field).toBe(key);
    }
    const done = await h.call("POST", `${API}/rollouts/${r.rollout_id}/attempts/latest`, {
      status: "succeeded",
    });
    expect(done.body.end_time).not.toBeNull();
    const again = await h.call("POST", `${API}/rollouts/${r.rollout_id}/attempts/latest`, {
      status: "running",
    });
    expect(again.status).toBe(409);
    const unknown = await h.call("POST", `${API}/rollouts/${r.rollout_id}/attempts/at-00000000`, {
      status: "failed",
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error_type).toBe("NotFoundError");
  });
});

describe("waits", () => {
  it("returns finished rollouts; timeout 0 checks once; long waits wake on completion", async () => {
    const a = (await h.call("POST", `${API}/rollouts`, { input: "a" })).body;
    const b = (await h.call("POST", `${API}/rollouts`, { input: "b" })).body;
    const none = await h.call("POST", `${API}/waits/rollouts`, { rollout_ids: [a.rollout_id], timeout: 0 });
    expect(none.body).toEqual([]);
    const started = Date.now();
    const pending = h.call("POST", `${API}/waits/rollouts`, {
      rollout_ids: [a.rollout_id, b.rollout_id],
      timeout: 60,
    });
    await new Promise((r) => setTimeout(r, 100));
    await h.call("POST", `${API}/rollouts/${a.rollout_id}/attempts/latest`, { status: "succeeded" });
    await h.call("POST", `${API}/rollouts/${b.rollout_id}/attempts/latest`, { status: "failed" });
    const res = await pending;
    // Woken by the completions, not by the 60 s timeout (a loaded machine only adds latency).
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(res.body.map((r: any) => r.status).sort()).toEqual(["failed", "succeeded"]);
    expect(res.headers.get("x-agl-wait-complete")).toBe("1");
    expect((await h.call("POST", `${API}/waits/rollouts`, { timeout: 1 })).status).toBe(422);
  });

  it("caps the server-side wait and says so", async () => {
    await h.close();
    h = await harness({ maxWaitSeconds: 0.3 });
    const a = (await h.call("POST", `${API}/rollouts`, { input: "a" })).body;
    const started = Date.now();
    const res = await h.call("POST", `${API}/waits/rollouts`, { rollout_ids: [a.rollout_id], timeout: 60 });
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(res.body).toEqual([]);
    expect(res.headers.get("x-agl-wait-complete")).toBeNull();
  });

  it("a wait that runs to the client's own timeout is not complete; unknown ids do not hold it", async () => {
    const a = (await h.call("POST", `${API}/rollouts`, { input: "a" })).body;
    const timedOut = await h.call("POST", `${API}/waits/rollouts`, {
      rollout_ids: [a.rollout_id],
      timeout: 0.2,
    });
    expect(timedOut.body).toEqual([]);
    expect(timedOut.headers.get("x-agl-wait-complete")).toBeNull();
    await h.call("POST", `${API}/rollouts/${a.rollout_id}/attempts/latest`, { status: "succeeded" });
    const started = Date.now();
    const done = await h.call("POST", `${API}/waits/rollouts`, {
      rollout_ids: [a.rollout_id, "ro-unknown"],
      timeout: 60,
    });
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(done.body.map((r: any) => r.rollout_id)).toEqual([a.rollout_id]);
    expect(done.headers.get("x-agl-wait-complete")).toBe("1");
  });
});
