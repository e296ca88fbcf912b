/**
 * The node fast path of the three requests every rollout makes (hot-handlers.ts): answered straight
 * from node's IncomingMessage/ServerResponse, without hono's Context, router and middleware chain or
 * the node adapter's Request/Response objects: 13% of the memory server's sampled CPU, and its CPU per
 * rollout fell by a quarter without them (bench/results/store-rollout-s8-sqlite.md). Only a request whose answer cannot depend on
 * anything hono would do differently is taken: POST, exactly one of these paths (no query string, no
 * percent-encoding), a Content-Length within the body limit, and, on a server with a token, exactly
 * `Authorization: Bearer <token>`. Everything else (a missing or odd token, chunked or oversized
 * bodies, every other route) goes to the hono app, which answers it as before.
 *
 * What a taken request gets matches the hono app's: the same deadline (504), body decoding (422),
 * handlers, error mapping (errors.ts), the x-agl-server header, the request log and the warn line of
 * refusals.ts; test/fast-routes.test.ts compares the two answer by answer.
 */
import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { LightningStore } from "@agl/core";
import { HTTPException } from "hono/http-exception";
import { jsonText, readIncoming } from "./body.js";
import { Deadlines } from "./deadline.js";
import { errorResponse, logFailure } from "./errors.js";
import { addSpan, startRollout, updateAttempt } from "./hot-handlers.js";
import type { StoreServerLogger } from "./logging.js";
import { parseJsonBody } from "./params.js";
import { AGL_CLIENT_HEADER, idsTarget, refusalUnseen, spanBodyTarget, warnRefusal } from "./refusals.js";
import type { RequestLog } from "./request-log.js";

export interface FastRoutesOptions {
  store: LightningStore;
  token: string | null | undefined;
  bodyLimitBytes: number;
  requestTimeoutMs: number;
  requestLog: RequestLog;
  logger: StoreServerLogger;
  /** The x-agl-server header's name (app.ts's AGL_SERVER_HEADER). */
  serverHeader: string;
}

type Route =
  | { kind: "start"; route: string }
  | { kind: "span"; route: string }
  | { kind: "attempt"; route: string; rid: string; aid: string };

const START: Route = { kind: "start", route: "/v1/agl/rollouts" };
const SPAN: Route = { kind: "span", route: "/v1/agl/spans" };
const ATTEMPT_ROUTE = "/v1/agl/rollouts/:rid/attempts/:aid";
const ROLLOUTS_PREFIX = "/v1/agl/rollouts/";

/** The fast route of a URL, or undefined when the hono app must route it. */
function match(url: string): Route | undefined {
  if (url === "/v1/agl/spans") return SPAN;
  if (url === "/v1/agl/rollouts") return START;
  if (!url.startsWith(ROLLOUTS_PREFIX) || url.includes("%") || url.includes("?")) return undefined;
  const parts = url.slice(ROLLOUTS_PREFIX.length).split("/");
  // POST .../attempts/search is the attempt search route, not an update of attempt "search".
  if (parts.length !== 3 || parts[1] !== "attempts" || parts[2] === "search") return undefined;
  const [rid, , aid] = parts as [string, string, string];
  if (rid === "" || aid === "") return undefined;
  return { kind: "attempt", route: ATTEMPT_ROUTE, rid, aid };
}

/**
 * A node request listener's front: answers a hot request and returns true, or returns false (having
 * touched nothing) for the hono app to answer.
 */
export function fastRoutes(
  options: FastRoutesOptions,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { store, bodyLimitBytes, requestLog, logger, serverHeader } = options;
  const expected = options.token ? Buffer.from(`Bearer ${options.token}`) : null;
  const deadlines = new Deadlines(
    options.requestTimeoutMs,
    () => new HTTPException(504, { message: `Request took longer than ${options.requestTimeoutMs} ms` }),
  );

  const authorized = (header: string | undefined): boolean => {
    if (expected === null) return true;
    if (header === undefined || header.length !== expected.length) return false;
    const given = Buffer.from(header);
    return given.length === expected.length && timingSafeEqual(given, expected);
  };

  const send = (res: ServerResponse, status: number, value: unknown): void => {
    const json = JSON.stringify(value);
    res.writeHead(status, [
      serverHeader,
      "agl-ts",
      "content-type",
      "application/json",
      "content-length",
      String(Buffer.byteLength(json)),
    ]);
    res.end(json);
  };

  const answer = async (req: IncomingMessage, route: Route): Promise<{ status: number; value: unknown }> => {
    const bytes = await readIncoming(req, bodyLimitBytes);
    if (bytes === null) {
      // Not reached while Content-Length is checked first (node stops a body at its declared length).
      return {
        status: 413,
        value: { detail: `Request body larger than ${bodyLimitBytes} bytes`, error_type: "PayloadTooLarge" },
      };
    }
    const { text, tooDeep } = jsonText(bytes);
    if (route.kind === "attempt") {
      return {
        status: 200,
        value: await updateAttempt(store, route.rid, route.aid, parseJsonBody(text, {}, tooDeep)),
      };
    }
    const body = parseJsonBody(text, undefined, tooDeep);
    if (route.kind === "start") return { status: 201, value: await startRollout(store, body) };
    target.set(req, spanBodyTarget(body));
    return { status: 201, value: await addSpan(store, body) };
  };

  /** Rollout/attempt ids a span body named, for a refusal's warn line (as the hono route notes them). */
  const target = new WeakMap<IncomingMessage, Record<string, string>>();

  const handle = async (req: IncomingMessage, res: ServerResponse, route: Route): Promise<void> => {
    const started = performance.now();
    const method = "POST";
    const path = req.url!;
    let status: number;
    let value: unknown;
    try {
      ({ status, value } = await deadlines.race(answer(req, route)));
    } catch (error) {
      const failure = errorResponse(error);
      logFailure(logger, error, failure.internal, failure.body.error_type, method, path);
      status = failure.status;
      value = failure.body;
    }
    send(res, status, value);
    requestLog.record(method, path, status, performance.now() - started);
    if (refusalUnseen(status, path, req.headers[AGL_CLIENT_HEADER] as string | undefined)) {
      const ids = route.kind === "attempt" ? idsTarget(route.rid, route.aid) : (target.get(req) ?? {});
      warnRefusal(logger, { method, route: route.route, path, status, target: ids }, value);
    }
  };

  return (req, res) => {
    if (req.method !== "POST") return false;
    const route = match(req.url ?? "");
    if (route === undefined) return false;
    if (!authorized(req.headers.authorization)) return false;
    const declared = req.headers["content-length"];
    if (declared === undefined || !(Number(declared) <= bodyLimitBytes)) return false;
    handle(req, res, route).catch((error: unknown) => {
      // Only the answer's own writing or logging can get here: cut the connection rather than hang it.
      logFailure(logger, error, true, "Error", "POST", req.url ?? "");
      res.destroy();
    });
    return true;
  };
}
