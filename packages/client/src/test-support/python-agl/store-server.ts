/**
 * A stand-in for Python Agent Lightning v0.3's store server (`agl store`, or the one its Trainer
 * starts), for testing agl-ts clients and workers against the other implementation without Python.
 * It answers exactly as the FastAPI app of store/client_server.py does, and nothing more:
 *
 * - only the `/v1/agl/*` routes that server has (no batch span routes, no agl-ts headers, no auth:
 *   a bearer token is ignored); an unknown POST gets 405 (the dashboard's GET catch-all matches
 *   the path), an unknown GET under /v1/ 404, both `{"detail": ...}`;
 * - request bodies validated like its pydantic models (models.ts): 422 with FastAPI's `detail` list;
 *   unknown keys dropped (kept on spans); explicit nulls where the route forbids them: 400;
 * - answers serialized through the response models (only their fields); a get-by-id miss is 200 `null`;
 * - any store exception: 500 `{"detail":"Internal server error","error_type":...,"traceback":...}`.
 *
 * The state machine behind it is agl-ts's in-memory store, which follows the same reference; where
 * agl-ts's store is stricter (it refuses some transitions Python accepts) this server answers 500
 * where Python would not, which can make a test fail but never pass wrongly.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { InMemoryLightningStore, type LightningStore } from "@agl/core";
import { checkPage, HttpAnswer, noNulls, parse, queryObject, requireKey } from "./fastapi-validation.js";
import * as M from "./models.js";

export interface PythonStoreServer {
  url: string;
  store: LightningStore;
  /** Every request: method, path and status, in arrival order. */
  log: Array<{ method: string; path: string; status: number; headers: IncomingMessage["headers"] }>;
  close(): Promise<void>;
}

const PREFIX = "/v1/agl";
const enc = decodeURIComponent;

const rolloutOut = (r: unknown) =>
  typeof r === "object" && r !== null && "attempt" in r ? M.AttemptedRollout.parse(r) : M.Rollout.parse(r);
const page = <T>(
  p: { items: T[]; limit: number; offset: number; total: number },
  item: (x: T) => unknown,
) => ({
  items: p.items.map(item),
  limit: p.limit,
  offset: p.offset,
  total: p.total,
});
const camelPage = (q: {
  sort_by?: string | null;
  sort_order: "asc" | "desc";
  limit: number;
  offset: number;
}) => ({
  ...(q.sort_by != null ? { sortBy: q.sort_by as never } : {}),
  sortOrder: q.sort_order,
  limit: q.limit,
  offset: q.offset,
});

type Handler = (args: { params: string[]; body: any; url: URL; store: LightningStore }) => Promise<unknown>;
interface Route {
  method: "GET" | "POST";
  pattern: RegExp;
  status?: number;
  handler: Handler;
}

function routes(): Route[] {
  const r = (method: Route["method"], path: string, handler: Handler, status?: number): Route => ({
    method,
    pattern: new RegExp(`^${PREFIX}${path.replace(/\{[a-z_]+\}/g, "([^/]+)")}$`),
    handler,
    ...(status ? { status } : {}),
  });
  const queryRollouts = async (store: LightningStore, raw: unknown, where: "body" | "query") => {
    const q = parse(M.Requests.queryRollouts, raw, where);
    checkPage(q, M.Rollout);
    const result = await store.queryRollouts({
      ...(q.status_in ? { statusIn: q.status_in } : {}),
      ...(q.rollout_id_in ? { rolloutIdIn: q.rollout_id_in } : {}),
      ...(q.rollout_id_contains != null ? { rolloutIdContains: q.rollout_id_contains } : {}),
      filterLogic: q.filter_logic,
      ...camelPage(q),
    });
    return page(result, rolloutOut);
  };
  const queryWorkers = async (store: LightningStore, raw: unknown, where: "body" | "query") => {
    const q = parse(M.Requests.queryWorkers, raw, where);
    checkPage(q, M.Worker);
    const result = await store.queryWorkers({
      ...(q.status_in ? { statusIn: q.status_in } : {}),
      ...(q.worker_id_contains != null ? { workerIdContains: q.worker_id_contains } : {}),
      filterLogic: q.filter_logic,
      ...camelPage(q),
    });
    return page(result, (w) => M.Worker.parse(w));
  };
  const queryAttempts = async (store: LightningStore, rid: string, raw: unknown, where: "body" | "query") => {
    const q = parse(M.Requests.queryAttempts, raw, where);
    checkPage(q, M.Attempt);
    return page(await store.queryAttempts(rid, camelPage(q)), (a) => M.Attempt.parse(a));
  };
  const querySpans = async (store: LightningStore, raw: unknown, where: "body" | "query") => {
    const q = parse(M.Requests.querySpans, raw, where);
    checkPage(q, M.Span);
    const filters: Record<string, string> = {};
    for (const key of ["trace_id", "span_id", "parent_id", "name"] as const) {
      const camel = key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
      if (q[key] != null) filters[camel] = q[key]!;
      if (q[`${key}_contains`] != null) filters[`${camel}Contains`] = q[`${key}_contains`]!;
    }
    const result = await store.querySpans(q.rollout_id, {
      attemptId: q.attempt_id,
      ...filters,
      filterLogic: q.filter_logic,
      ...camelPage(q),
    });
    return page(result, (s) => M.Span.parse(s));
  };
  return [
    r("GET", "/health", async () => ({ status: "ok" })),
    r(
      "POST",
      "/queues/rollouts/enqueue",
      async ({ body, store }) => {
        const req = parse(M.Requests.enqueueMany, body);
        (body.rollouts as unknown[]).forEach((item, i) => {
          if (typeof item !== "object" || item === null || !("input" in item)) {
            throw new HttpAnswer(422, {
              detail: [
                {
                  type: "missing",
                  loc: ["body", "rollouts", i, "input"],
                  msg: "Field required",
                  input: item,
                },
              ],
            });
          }
        });
        const made = await store.enqueueManyRollouts(req.rollouts as never);
        return made.map((x) => M.Rollout.parse(x));
      },
      201,
    ),
    r("POST", "/queues/rollouts/dequeue", async ({ body, store }) => {
      const req = parse(M.Requests.dequeueMany, body ?? {});
      if (req.limit <= 0) return [];
      const claimed = await store.dequeueManyRollouts({ limit: req.limit, workerId: req.worker_id });
      return claimed.map((x) => M.AttemptedRollout.parse(x));
    }),
    r(
      "POST",
      "/rollouts",
      async ({ body, store }) => {
        requireKey(body, "input");
        const req = parse(M.Requests.startRollout, body);
        return M.AttemptedRollout.parse(await store.startRollout(req as never));
      },
      201,
    ),
    r("GET", "/rollouts", async ({ url, store }) =>
      queryRollouts(store, queryObject(url, ["status_in", "rollout_id_in"]), "query"),
    ),
    r("POST", "/rollouts/search", async ({ body, store }) => queryRollouts(store, body, "body")),
    r("GET", "/rollouts/{rid}", async ({ params, store }) => {
      const found = await store.getRolloutById(enc(params[0]!));
      return found ? rolloutOut(found) : null;
    }),
    r("POST", "/rollouts/{rid}", async ({ params, body, store }) => {
      const req = parse(M.Requests.updateRollout, body);
      noNulls(body, ["status", "config"]);
      const patch = Object.fromEntries(Object.keys(req).map((k) => [k, (req as Record<string, unknown>)[k]]));
      if ("input" in body) patch.input = body.input;
      return M.Rollout.parse(await store.updateRollout(enc(params[0]!), patch as never));
    }),
    r(
      "POST",
      "/rollouts/{rid}/attempts",
      async ({ params, body, store }) => {
        const req = parse(M.Requests.startAttempt, body ?? {});
        return M.AttemptedRollout.parse(
          await store.startAttempt(enc(params[0]!), { workerId: req.worker_id }),
        );
      },
      undefined,
    ),
    r("GET", "/rollouts/{rid}/attempts", async ({ params, url, store }) =>
      queryAttempts(store, enc(params[0]!), queryObject(url, []), "query"),
    ),
    r("POST", "/rollouts/{rid}/attempts/search", async ({ params, body, store }) =>
      queryAttempts(store, enc(params[0]!), body, "body"),
    ),
    r("GET", "/rollouts/{rid}/attempts/latest", async ({ params, store }) => {
      const found = await store.getLatestAttempt(enc(params[0]!));
      return found ? M.Attempt.parse(found) : null;
    }),
    r("POST", "/rollouts/{rid}/attempts/{aid}", async ({ params, body, store }) => {
      const req = parse(M.Requests.updateAttempt, body);
      noNulls(body, ["status", "worker_id", "last_heartbeat_time", "metadata"]);
      return M.Attempt.parse(await store.updateAttempt(enc(params[0]!), enc(params[1]!), req as never));
    }),
    r("GET", "/workers", async ({ url, store }) =>
      queryWorkers(store, queryObject(url, ["status_in"]), "query"),
    ),
    r("POST", "/workers/search", async ({ body, store }) => queryWorkers(store, body, "body")),
    r("GET", "/workers/{wid}", async ({ params, store }) => {
      const found = await store.getWorkerById(enc(params[0]!));
      return found ? M.Worker.parse(found) : null;
    }),
    r("POST", "/workers/{wid}", async ({ params, body, store }) => {
      const req = parse(M.Requests.updateWorker, body ?? {});
      noNulls(body ?? {}, ["heartbeat_stats"]);
      return M.Worker.parse(await store.updateWorker(enc(params[0]!), req as never));
    }),
    r("GET", "/statistics", async ({ store }) => {
      const { name: _ours, ...counts } = (await store.statistics()) as unknown as Record<string, unknown>;
      return { name: "InMemoryLightningStore", ...counts };
    }),
    r("GET", "/resources", async ({ url, store }) => {
      const q = parse(M.Requests.queryResources, queryObject(url, []), "query");
      checkPage(q, M.ResourcesUpdate);
      const result = await store.queryResources({
        ...(q.resources_id != null ? { resourcesId: q.resources_id } : {}),
        ...(q.resources_id_contains != null ? { resourcesIdContains: q.resources_id_contains } : {}),
        ...camelPage(q),
      });
      return page(result, (x) => M.ResourcesUpdate.parse(x));
    }),
    r(
      "POST",
      "/resources",
      async ({ body, store }) =>
        M.ResourcesUpdate.parse(await store.addResources(parse(M.NamedResources, body) as never)),
      201,
    ),
    r("GET", "/resources/latest", async ({ store }) => {
      const found = await store.getLatestResources();
      return found ? M.ResourcesUpdate.parse(found) : null;
    }),
    r("POST", "/resources/{id}", async ({ params, body, store }) =>
      M.ResourcesUpdate.parse(
        await store.updateResources(enc(params[0]!), parse(M.NamedResources, body) as never),
      ),
    ),
    r("GET", "/resources/{id}", async ({ params, store }) => {
      const found = await store.getResourcesById(enc(params[0]!));
      return found ? M.ResourcesUpdate.parse(found) : null;
    }),
    r(
      "POST",
      "/spans",
      async ({ body, store }) => {
        const stored = await store.addSpan(parse(M.Span, body) as never);
        return stored ? M.Span.parse(stored) : null;
      },
      201,
    ),
    r("GET", "/spans", async ({ url, store }) => querySpans(store, queryObject(url, []), "query")),
    r("POST", "/spans/search", async ({ body, store }) => querySpans(store, body, "body")),
    r("POST", "/spans/next", async ({ body, store }) => {
      const req = parse(M.Requests.nextSequenceId, body);
      return { sequence_id: await store.getNextSpanSequenceId(req.rollout_id, req.attempt_id) };
    }),
    r("POST", "/waits/rollouts", async ({ body, store }) => {
      const req = parse(M.Requests.waitForRollouts, body);
      const done = await store.waitForRollouts(req.rollout_ids, { timeoutSeconds: req.timeout });
      return done.map((x) => M.Rollout.parse(x));
    }),
  ];
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  // uvicorn + FastAPI's JSONResponse: these headers and no others of note.
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    server: "uvicorn",
  });
  res.end(text);
}

export async function startPythonStoreServer(
  options: { store?: LightningStore } = {},
): Promise<PythonStoreServer> {
  const store = options.store ?? new InMemoryLightningStore();
  const table = routes();
  const log: PythonStoreServer["log"] = [];
  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const method = req.method ?? "GET";
    const answer = (status: number, body: unknown) => {
      log.push({ method, path: url.pathname, status, headers: req.headers });
      send(res, status, body);
    };
    const text = await readBody(req);
    const matching = table.filter((route) => route.pattern.test(url.pathname));
    const route = matching.find((x) => x.method === method);
    if (!route) {
      // The dashboard's `GET /{full_path:path}` matches every path, so another method gets 405.
      if (method !== "GET") return answer(405, { detail: "Method Not Allowed" });
      return answer(404, { detail: "Not Found" });
    }
    let body: unknown = null;
    if (text.length > 0) {
      try {
        body = JSON.parse(text);
      } catch {
        return answer(422, {
          detail: [{ type: "json_invalid", loc: ["body", 0], msg: "JSON decode error", input: {} }],
        });
      }
    }
    try {
      const params = route.pattern.exec(url.pathname)!.slice(1);
      const result = await route.handler({ params, body, url, store });
      answer(route.status ?? 200, result ?? null);
    } catch (error) {
      if (error instanceof HttpAnswer) return answer(error.status, error.body);
      const e = error as Error;
      answer(500, {
        detail: "Internal server error",
        error_type: "ValueError",
        traceback: `Traceback (most recent call last):\n  File "agentlightning/store/client_server.py"\nValueError: ${e.message}\n`,
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    store,
    log,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
