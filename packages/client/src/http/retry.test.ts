import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { IllegalTransitionError, InvalidArgumentError, NotFoundError } from "@agl/core";
import { afterEach, describe, expect, it } from "vitest";
import { LightningStoreClient } from "../store-client.js";
import { HttpClientError, HttpError, HttpNetworkError, HttpServerError } from "./errors.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A scripted fake store server: each route answers from a queue of handlers (the last one repeats). */
async function fakeServer(routes: Record<string, Handler[]>) {
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    const key = `${req.method} ${req.url}`;
    hits.push(key);
    const queue = routes[key];
    if (!queue || queue.length === 0) {
      res.writeHead(404).end();
      return;
    }
    const handler = queue.length > 1 ? queue.shift()! : queue[0]!;
    req.resume();
    req.on("end", () => handler(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, hits, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const json =
  (status: number, body: unknown): Handler =>
  (_req, res) => {
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  };

const stats = {
  name: "x",
  total_rollouts: 0,
  total_attempts: 0,
  total_spans: 0,
  total_resources: 0,
  total_workers: 0,
  uptime: 1,
};
const healthy = json(200, { status: "ok" });
const client = (url: string) =>
  new LightningStoreClient({ url, retryDelaysMs: [10, 20, 30], healthRetryDelaysMs: [5, 5] });

let closeServer: (() => Promise<void>) | undefined;
afterEach(async () => {
  await closeServer?.();
  closeServer = undefined;
});

describe("LightningStoreClient retries", () => {
  it("retries a 5xx after a healthy probe, then succeeds", async () => {
    const s = await fakeServer({
      "GET /v1/agl/statistics": [json(500, { detail: "x" }), json(503, { detail: "y" }), json(200, stats)],
      "GET /v1/agl/health": [healthy],
    });
    closeServer = s.close;
    expect(await client(s.url).statistics()).toMatchObject({ name: "x" });
    expect(s.hits.filter((h) => h.includes("statistics"))).toHaveLength(3);
    expect(s.hits.filter((h) => h.includes("health"))).toHaveLength(2);
  });

  it("retries 408 too, and POSTs (other than dequeue)", async () => {
    const rollout = { rollout_id: "ro-1", input: 1, start_time: 1, status: "queuing" };
    const s = await fakeServer({
      "POST /v1/agl/queues/rollouts/enqueue": [json(408, { detail: "slow" }), json(201, [rollout])],
      "GET /v1/agl/health": [healthy],
    });
    closeServer = s.close;
    expect((await client(s.url).enqueueRollout({ input: 1 })).rollout_id).toBe("ro-1");
    expect(s.hits.filter((h) => h.includes("enqueue"))).toHaveLength(2);
  });

  it("gives up after the retry delays with an HttpServerError carrying status and server message", async () => {
    const s = await fakeServer({
      "GET /v1/agl/statistics": [json(500, { detail: "Internal server error", error_type: "ValueError" })],
      "GET /v1/agl/health": [healthy],
    });
    closeServer = s.close;
    const error = await client(s.url)
      .statistics()
      .catch((e) => e);
    expect(error).toBeInstanceOf(HttpServerError);
    expect(HttpError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ status: 500, detail: "Internal server error", errorType: "ValueError" });
    expect(s.hits.filter((h) => h.includes("statistics"))).toHaveLength(4);
  });

  it("stops at once when the health probe says the server is down", async () => {
    const s = await fakeServer({
      "GET /v1/agl/statistics": [json(502, { detail: "bad gateway" })],
      "GET /v1/agl/health": [json(503, { detail: "down" })],
    });
    closeServer = s.close;
    const error = await client(s.url)
      .statistics()
      .catch((e) => e);
    expect(error).toBeInstanceOf(HttpServerError);
    expect(error.status).toBe(502);
    expect(s.hits.filter((h) => h.includes("statistics"))).toHaveLength(1);
    expect(s.hits.filter((h) => h.includes("health"))).toHaveLength(3);
  });

  it("never retries other 4xx and maps store errors to the core classes", async () => {
    const s = await fakeServer({
      "POST /v1/agl/rollouts/ro-x": [
        json(404, { detail: "Rollout ro-x not found", error_type: "NotFoundError", field: "rollout_id" }),
      ],
      "POST /v1/agl/rollouts/ro-y": [
        json(409, {
          detail: "Illegal rollout status transition for ro-y: succeeded -> running",
          error_type: "IllegalTransitionError",
          field: "status",
        }),
      ],
      "POST /v1/agl/rollouts/ro-z": [
        json(422, { detail: "Invalid mode: bad", error_type: "ValidationError", field: "mode" }),
      ],
      "POST /v1/agl/rollouts/ro-w": [
        json(401, { detail: "Missing bearer token", error_type: "Unauthorized" }),
      ],
      "GET /v1/agl/health": [healthy],
    });
    closeServer = s.close;
    const c = client(s.url);
    const nf = await c.updateRollout("ro-x", { mode: "val" }).catch((e) => e);
    expect(NotFoundError.isInstance(nf)).toBe(true);
    expect(HttpError.isInstance(nf)).toBe(true);
    expect(nf).toMatchObject({ status: 404, kind: "rollout", id: "ro-x", message: "Rollout ro-x not found" });
    const illegal = await c.updateRollout("ro-y", { status: "running" }).catch((e) => e);
    expect(IllegalTransitionError.isInstance(illegal)).toBe(true);
    expect(illegal).toMatchObject({
      status: 409,
      entity: "rollout",
      id: "ro-y",
      from: "succeeded",
      to: "running",
    });
    const inv = await c.updateRollout("ro-z", { mode: "val" }).catch((e) => e);
    expect(InvalidArgumentError.isInstance(inv)).toBe(true);
    expect(inv).toMatchObject({ status: 422, field: "mode" });
    const unauth = await c.updateRollout("ro-w", { mode: "val" }).catch((e) => e);
    expect(unauth).toBeInstanceOf(HttpClientError);
    expect(unauth.status).toBe(401);
    expect(s.hits.filter((h) => h.includes("health"))).toHaveLength(0);
    expect(s.hits).toHaveLength(4);
  });

  it("never retries a dequeue (a lost answer must not claim twice)", async () => {
    const s = await fakeServer({
      "POST /v1/agl/queues/rollouts/dequeue": [json(500, { detail: "x" })],
      "GET /v1/agl/health": [healthy],
    });
    closeServer = s.close;
    await expect(client(s.url).dequeueRollout()).rejects.toBeInstanceOf(HttpServerError);
    expect(s.hits).toEqual(["POST /v1/agl/queues/rollouts/dequeue"]);
  });

  it("empty retry delays disable retries; a refused connection is an HttpNetworkError", async () => {
    const s = await fakeServer({
      "GET /v1/agl/statistics": [json(500, {})],
      "GET /v1/agl/health": [healthy],
    });
    const noRetry = new LightningStoreClient({ url: s.url, retryDelaysMs: [] });
    await expect(noRetry.statistics()).rejects.toBeInstanceOf(HttpServerError);
    expect(s.hits).toEqual(["GET /v1/agl/statistics"]);
    await s.close();
    const started = Date.now();
    const error = await client(s.url)
      .statistics()
      .catch((e) => e);
    expect(error).toBeInstanceOf(HttpNetworkError);
    expect(error.status).toBe(0);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("falls back to one request per span on servers without the batch routes", async () => {
    const span = (id: string) => ({
      rollout_id: "ro-1",
      attempt_id: "at-1",
      sequence_id: 1,
      trace_id: "t",
      span_id: id,
      name: "n",
    });
    const s = await fakeServer({
      "POST /v1/agl/spans/batch": [json(404, { detail: "Not Found" })],
      "POST /v1/agl/spans": [(req, res) => json(201, span("s"))(req, res)],
      "GET /v1/agl/health": [healthy],
    });
    closeServer = s.close;
    const c = client(s.url);
    expect(await c.addManySpans([span("a"), span("b")])).toHaveLength(2);
    expect(await c.addManySpans([span("c")])).toHaveLength(1);
    expect(s.hits.filter((h) => h.endsWith("/spans/batch"))).toHaveLength(1);
    expect(s.hits.filter((h) => h.endsWith("/spans"))).toHaveLength(3);
  });
});
