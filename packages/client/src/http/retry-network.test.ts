/**
 * Retries on failures without an answer (reset socket, refused connection, client timeout), the
 * backoff delays, and the narrower rule for requests that create something (enqueue, start
 * attempt...): those are resent only when the server provably did not act on them.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { LightningStoreClient } from "../store-client.js";
import { HttpNetworkError, HttpServerError } from "./errors.js";

/** What a scripted route does with one request: answer, or drop the connection, or never answer. */
type Step = { status: number; body: unknown } | "reset" | "hang";

interface Hit {
  key: string;
  at: number;
}

/** A fake store server whose routes play scripted steps in order (the last one repeats). */
async function scripted(routes: Record<string, Step[]>, port = 0) {
  const hits: Hit[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const key = `${req.method} ${req.url}`;
    hits.push({ key, at: performance.now() });
    const queue = routes[key] ?? [{ status: 404, body: { detail: "no route" } }];
    const step = queue.length > 1 ? queue.shift()! : queue[0]!;
    req.resume();
    req.on("end", () => {
      if (step === "reset") req.socket.destroy();
      else if (step !== "hang") {
        res.writeHead(step.status, { "content-type": "application/json" }).end(JSON.stringify(step.body));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return { url, port: (server.address() as AddressInfo).port, hits, close };
}

const ok = (body: unknown, status = 200): Step => ({ status, body });
const healthy: Step = ok({ status: "ok" });
const stats = { name: "x", total_rollouts: 0 };
const rollout = { rollout_id: "ro-1", input: 1, start_time: 1, status: "queuing" };
const attempt = { rollout_id: "ro-1", attempt_id: "at-1", sequence_id: 1, start_time: 1, status: "running" };
const count = (hits: Hit[], part: string) => hits.filter((h) => h.key.includes(part)).length;

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (closers.length) await closers.pop()!();
});

function client(
  url: string,
  extra: Partial<ConstructorParameters<typeof LightningStoreClient>[0] & object> = {},
) {
  const c = new LightningStoreClient({
    url,
    retryDelaysMs: [10, 10, 10],
    healthRetryDelaysMs: [5, 5],
    ...extra,
  });
  closers.push(() => c.close());
  return c;
}

describe("LightningStoreClient retries without an answer", () => {
  it("a socket reset is retried after a healthy probe, then succeeds", async () => {
    const s = await scripted({
      "GET /v1/agl/statistics": ["reset", ok(stats)],
      "GET /v1/agl/health": [healthy],
    });
    closers.push(s.close);
    expect(await client(s.url).statistics()).toMatchObject({ name: "x" });
    expect(count(s.hits, "statistics")).toBe(2);
    expect(count(s.hits, "health")).toBe(1);
  });

  it("a client-side timeout is retried, then succeeds", async () => {
    const s = await scripted({
      "GET /v1/agl/statistics": ["hang", ok(stats)],
      "GET /v1/agl/health": [healthy],
    });
    closers.push(s.close);
    const started = performance.now();
    expect(await client(s.url, { timeoutMs: 150 }).statistics()).toMatchObject({ name: "x" });
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    expect(count(s.hits, "statistics")).toBe(2);
  });

  it("a server that goes away mid-run is waited for through the health probes, then the call succeeds", async () => {
    const first = await scripted({ "GET /v1/agl/statistics": [ok(stats)], "GET /v1/agl/health": [healthy] });
    const c = client(first.url, { healthRetryDelaysMs: [50, 50, 100, 200] });
    expect(await c.statistics()).toMatchObject({ name: "x" });
    await first.close();
    // Back on the same port while the client is still probing health after a refused connection.
    let second: Awaited<ReturnType<typeof scripted>> | undefined;
    const restart = setTimeout(async () => {
      second = await scripted(
        { "GET /v1/agl/statistics": [ok(stats)], "GET /v1/agl/health": [healthy] },
        first.port,
      );
      closers.push(second.close);
    }, 80);
    closers.push(async () => clearTimeout(restart));
    expect(await c.statistics()).toMatchObject({ name: "x" });
    expect(second).toBeDefined();
    expect(count(second!.hits, "health")).toBeGreaterThanOrEqual(1);
    expect(count(second!.hits, "statistics")).toBe(1);
  });

  it("waits the configured backoff before each retry", async () => {
    const s = await scripted({
      "GET /v1/agl/statistics": [
        ok({ detail: "x" }, 500),
        ok({ detail: "x" }, 500),
        ok({ detail: "x" }, 500),
        ok(stats),
      ],
      "GET /v1/agl/health": [healthy],
    });
    closers.push(s.close);
    const delays = [40, 120, 80];
    expect(
      await client(s.url, { retryDelaysMs: delays, healthRetryDelaysMs: [] }).statistics(),
    ).toMatchObject({
      name: "x",
    });
    const at = s.hits.filter((h) => h.key.includes("statistics")).map((h) => h.at);
    expect(at).toHaveLength(4);
    for (let i = 0; i < delays.length; i++) {
      const gap = at[i + 1]! - at[i]!;
      expect(gap).toBeGreaterThanOrEqual(delays[i]! - 2);
      expect(gap).toBeLessThan(delays[i]! + 150);
    }
  });
});

describe("requests that create something are resent only when the server did not act", () => {
  it("enqueue: 504, 500 and 502 are not retried (the store may have committed)", async () => {
    for (const status of [504, 500, 502]) {
      const s = await scripted({
        "POST /v1/agl/queues/rollouts/enqueue": [ok({ detail: "slow" }, status), ok([rollout], 201)],
        "GET /v1/agl/health": [healthy],
      });
      closers.push(s.close);
      const error = await client(s.url)
        .enqueueRollout({ input: 1 })
        .catch((e) => e);
      expect(error).toBeInstanceOf(HttpServerError);
      expect(error.status).toBe(status);
      expect(count(s.hits, "enqueue")).toBe(1);
      expect(count(s.hits, "health")).toBe(0);
    }
  });

  it("enqueue: a reset after sending or a client timeout is not retried", async () => {
    for (const step of ["reset", "hang"] as const) {
      const s = await scripted({
        "POST /v1/agl/queues/rollouts/enqueue": [step, ok([rollout], 201)],
        "GET /v1/agl/health": [healthy],
      });
      closers.push(s.close);
      const error = await client(s.url, { timeoutMs: 150 })
        .enqueueRollout({ input: 1 })
        .catch((e) => e);
      expect(error).toBeInstanceOf(HttpNetworkError);
      expect(count(s.hits, "enqueue")).toBe(1);
    }
  });

  it("start attempt and start rollout: a 503 or 408 (not processed) is retried", async () => {
    const s = await scripted({
      "POST /v1/agl/rollouts/ro-1/attempts": [ok({ detail: "busy" }, 503), ok({ ...rollout, attempt }, 201)],
      "POST /v1/agl/rollouts": [ok({ detail: "slow body" }, 408), ok({ ...rollout, attempt }, 201)],
      "GET /v1/agl/health": [healthy],
    });
    closers.push(s.close);
    const c = client(s.url);
    expect((await c.startAttempt("ro-1")).attempt.attempt_id).toBe("at-1");
    expect((await c.startRollout({ input: 1 })).rollout_id).toBe("ro-1");
    expect(count(s.hits, "attempts")).toBe(2);
    expect(s.hits.filter((h) => h.key === "POST /v1/agl/rollouts")).toHaveLength(2);
  });

  it("enqueue: a refused connection (nothing sent) is retried once the server is back", async () => {
    const first = await scripted({});
    const port = first.port;
    await first.close();
    let server: Awaited<ReturnType<typeof scripted>> | undefined;
    const c = client(first.url, { healthRetryDelaysMs: [50, 100, 200, 400] });
    const restart = setTimeout(async () => {
      server = await scripted(
        { "POST /v1/agl/queues/rollouts/enqueue": [ok([rollout], 201)], "GET /v1/agl/health": [healthy] },
        port,
      );
      closers.push(server.close);
    }, 60);
    closers.push(async () => clearTimeout(restart));
    expect((await c.enqueueRollout({ input: 1 })).rollout_id).toBe("ro-1");
    expect(count(server!.hits, "enqueue")).toBe(1);
  });

  it("idempotent writes (attempt patch, span batch) are still retried on 504", async () => {
    const span = {
      rollout_id: "ro-1",
      attempt_id: "at-1",
      sequence_id: 1,
      trace_id: "t",
      span_id: "s",
      name: "n",
    };
    const s = await scripted({
      "POST /v1/agl/rollouts/ro-1/attempts/at-1": [ok({ detail: "slow" }, 504), ok(attempt)],
      "POST /v1/agl/spans/batch": [ok({ detail: "slow" }, 504), ok([span], 201)],
      "GET /v1/agl/health": [healthy],
    });
    closers.push(s.close);
    const c = client(s.url);
    expect((await c.updateAttempt("ro-1", "at-1", { status: "running" })).status).toBe("running");
    expect(await c.addManySpans([span])).toHaveLength(1);
    expect(count(s.hits, "attempts/at-1")).toBe(2);
    expect(count(s.hits, "spans/batch")).toBe(2);
  });
});
