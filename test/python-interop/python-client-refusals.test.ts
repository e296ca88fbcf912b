import { LightningStoreClient } from "@agl/client";
import { InMemoryLightningStore, MAX_DEQUEUE_LIMIT } from "@agl/core";
import { jsonLinesLogger, type StoreServer, startStoreServer } from "@agl/store";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type PythonStoreServer,
  startPythonStoreServer,
} from "../../packages/client/src/test-support/python-agl/index.js";

/**
 * Limits a Python Agent Lightning client cannot see: its store client swallows some errors (a 422 on
 * dequeue becomes `[]`, a 401 becomes `None`), so a runner would idle without a word. The same
 * requests the Python client sends (no `x-agl-client` header) go to the Python-protocol stand-in and to
 * agl-store: agl-store clamps the dequeue `limit` like the stand-in serves it, and every refusal it must
 * keep (a 513-character id, a missing or wrong token) is logged at warn with the route and the reason.
 */

const TOKEN = "s3cret-token-value";
let python: PythonStoreServer;
let agl: StoreServer;
let logs: Array<Record<string, any>>;

beforeAll(async () => {
  python = await startPythonStoreServer();
  logs = [];
  agl = await startStoreServer({
    store: new InMemoryLightningStore(),
    port: 0,
    token: TOKEN,
    logger: jsonLinesLogger((line) => logs.push(JSON.parse(line))),
  });
});
afterAll(async () => {
  await agl?.close();
  await python?.close();
});

/** A request as Python's store client makes it (aiohttp: JSON body, optional bearer token). */
async function pythonCall(
  base: string,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
  token?: string,
) {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${base}/v1/agl/${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: await res.json() };
}

const warnings = () => logs.filter((l) => l.level === "warn" && l.msg === "request refused");

describe("a Python client's requests that agl-store limits", () => {
  it("dequeue limit above the maximum is clamped (200, a full batch), as the stand-in serves it", async () => {
    const count = MAX_DEQUEUE_LIMIT + 5;
    const rollouts = Array.from({ length: count }, (_, i) => ({ input: i }));
    for (const base of [python.url, agl.url]) {
      const enqueued = await pythonCall(base, "POST", "queues/rollouts/enqueue", { rollouts }, TOKEN);
      expect(enqueued.status).toBe(201);
    }
    const request = { limit: 5000, worker_id: "py-runner" };
    const fromPython = await pythonCall(python.url, "POST", "queues/rollouts/dequeue", request);
    // A full batch, not the empty list the Python client would make of a 422 (Python's own server has
    // no maximum; the stand-in's state machine is agl-ts's memory store, which clamps like agl-store).
    expect(fromPython.status).toBe(200);
    expect(fromPython.body).toHaveLength(MAX_DEQUEUE_LIMIT);
    const before = warnings().length;
    const first = await pythonCall(agl.url, "POST", "queues/rollouts/dequeue", request, TOKEN);
    expect(first.status).toBe(200);
    expect(first.body).toHaveLength(MAX_DEQUEUE_LIMIT);
    const rest = await pythonCall(agl.url, "POST", "queues/rollouts/dequeue", request, TOKEN);
    expect(rest.body).toHaveLength(5);
    const ids = new Set([...first.body, ...rest.body].map((r: { rollout_id: string }) => r.rollout_id));
    expect(ids.size).toBe(count);
    expect(warnings().length).toBe(before);
  });

  it("a 513-character id: refused (the id rule stays) and warned with route and reason", async () => {
    // The stand-in shares agl-ts's id rule through its store (it answers 500 with a traceback, which
    // the Python client logs); agl-store answers 400 naming the field and says so in its own log.
    const id = "r".repeat(513);
    const fromPython = await pythonCall(python.url, "GET", `resources/${id}`);
    expect(fromPython.body.traceback).toMatch(/at most 512 characters/);
    const before = warnings().length;
    const refused = await pythonCall(agl.url, "GET", `resources/${id}`, undefined, TOKEN);
    expect(refused.status).toBe(400);
    const [warn] = warnings().slice(before);
    expect(warn).toMatchObject({
      level: "warn",
      method: "GET",
      route: "/v1/agl/resources/:id",
      status: 400,
      field: "resources_id",
      reason: expect.stringMatching(/at most 512 characters/),
    });
    expect(warn!.path.length).toBeLessThanOrEqual(201);
  });

  it("401 without a token or with a wrong one: warned with the route and reason, never the token", async () => {
    expect(
      (await pythonCall(python.url, "POST", "queues/rollouts/dequeue", { limit: 1 }, "wrong")).status,
    ).toBe(200);
    const before = warnings().length;
    const missing = await pythonCall(agl.url, "POST", "queues/rollouts/dequeue", { limit: 1 });
    const wrong = await pythonCall(
      agl.url,
      "POST",
      "queues/rollouts/dequeue",
      { limit: 1 },
      "wrong-guess-xyz",
    );
    expect([missing.status, wrong.status]).toEqual([401, 401]);
    const warned = warnings().slice(before);
    expect(warned.map((w) => [w.method, w.path, w.status, w.reason])).toEqual([
      ["POST", "/v1/agl/queues/rollouts/dequeue", 401, "Missing bearer token"],
      ["POST", "/v1/agl/queues/rollouts/dequeue", 401, "Invalid bearer token"],
    ]);
    const all = JSON.stringify(logs);
    expect(all).not.toContain("wrong-guess-xyz");
    expect(all).not.toContain(TOKEN);
  });

  it("a refused span or attempt update names its rollout and attempt in the warn line", async () => {
    let deep: unknown = "leaf";
    for (let i = 0; i < 80; i++) deep = { k: deep };
    const before = warnings().length;
    const span = {
      rollout_id: "ro-x",
      attempt_id: "at-x",
      sequence_id: 1,
      trace_id: "t",
      span_id: "s",
      name: "n\u0000",
      attributes: { deep },
    };
    expect((await pythonCall(agl.url, "POST", "spans", span, TOKEN)).status).toBe(422);
    const update = await pythonCall(
      agl.url,
      "POST",
      "rollouts/ro-gone/attempts/at-gone",
      { status: "failed" },
      TOKEN,
    );
    expect(update.status).toBe(404);
    expect(warnings().slice(before)).toEqual([
      expect.objectContaining({
        route: "/v1/agl/spans",
        status: 422,
        reason: expect.stringMatching(/nest deeper/),
        rollout_id: "ro-x",
        attempt_id: "at-x",
      }),
      expect.objectContaining({
        route: "/v1/agl/rollouts/:rid/attempts/:aid",
        status: 404,
        rollout_id: "ro-gone",
        attempt_id: "at-gone",
      }),
    ]);
  });

  it("agl-ts clients (x-agl-client) see their errors themselves: no warn", async () => {
    const client = new LightningStoreClient({ url: agl.url, token: "not-it", retryDelaysMs: [] });
    const before = warnings().length;
    await expect(client.dequeueRollout()).rejects.toThrow(/401/);
    const good = new LightningStoreClient({ url: agl.url, token: TOKEN, retryDelaysMs: [] });
    await expect(good.getResourcesById("r".repeat(513))).rejects.toThrow(/512/);
    expect(warnings().length).toBe(before);
    // The request log still records them at info.
    expect(logs.filter((l) => l.msg === "request" && l.status === 401).length).toBeGreaterThanOrEqual(3);
    await client.close();
    await good.close();
  });
});
