import { timingSafeEqual } from "node:crypto";
import type { ServerResponse } from "node:http";
import { type LightningStore, packageVersion } from "@agl/core";
import { Hono } from "hono";
import { bearerAuth } from "hono/bearer-auth";
import { HTTPException } from "hono/http-exception";
import { limitBody } from "./body.js";
import { requestDeadline } from "./deadline.js";
import { errorResponse, logFailure } from "./errors.js";
import { registerLegacyRoutes } from "./legacy.js";
import { jsonLinesLogger, type StoreServerLogger } from "./logging.js";
import { openApiDocument } from "./openapi.js";
import { registerOtlpRoutes } from "./otlp/route.js";
import { warnUnseenRefusal } from "./refusals.js";
import { RequestLog } from "./request-log.js";
import { registerMiscRoutes } from "./routes-misc.js";
import { registerRolloutRoutes } from "./routes-rollouts.js";

export interface StoreAppOptions {
  /** Require `Authorization: Bearer <token>` on every route except GET /v1/agl/health. Null/absent: open. */
  token?: string | null;
  /** Largest request body in bytes (413 above). Default 32 MiB. */
  bodyLimitBytes?: number;
  /**
   * Per-request deadline in ms (504 after), reading the body included. Default 60 s. Long waits are capped below it. The store
   * call is not cancelled and may still commit, which is why @agl/client does not resend creates.
   */
  requestTimeoutMs?: number;
  /** Longest server-side wait of POST /v1/agl/waits/rollouts in seconds. Default 20. */
  maxWaitSeconds?: number;
  /** Where request and error logs go. Default: JSON lines on stderr. */
  logger?: StoreServerLogger;
  /** Legacy task API: requeue a task claimed longer ago than this without a result. Default 300 s. */
  legacyTaskTimeoutSeconds?: number;
  /** Aborted on shutdown so long waits return early (startStoreServer wires this). */
  shutdownSignal?: AbortSignal;
  /**
   * How often (ms) the info-level summary of answered requests is logged; each request has its own
   * line only at debug, and each 4xx/5xx at info. Default 60 s.
   */
  requestSummaryMs?: number;
  /** The request log to record into (startStoreServer passes its own, to flush it at close). */
  requestLog?: RequestLog;
  /**
   * A web page mounted at /dashboard (e.g. `createDashboardApp()` of @agl/dashboard), served without the
   * bearer check: the page holds no data and asks for the token before calling the API. The sub-app
   * guards anything private it serves itself. `/` redirects to it.
   */
  dashboard?: Hono;
}

/** Where `StoreAppOptions.dashboard` is mounted. */
export const DASHBOARD_PATH = "/dashboard";

/** Marks every answer of this server; @agl/client skips re-parsing hot-route answers that carry it. */
export const AGL_SERVER_HEADER = "x-agl-server";

export const DEFAULT_BODY_LIMIT_BYTES = 32 * 1024 * 1024;
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

/** The store server as a hono app: the v0.3 REST API under /v1/agl, OTLP ingest, and the legacy task API. */
export function createStoreApp(store: LightningStore, options: StoreAppOptions = {}): Hono {
  const logger = options.logger ?? jsonLinesLogger();
  const bodyLimitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const maxWaitSeconds = Math.max(0, Math.min(options.maxWaitSeconds ?? 20, requestTimeoutMs / 1000 - 1));
  const shutdownSignal = options.shutdownSignal ?? new AbortController().signal;
  const requestLog = options.requestLog ?? new RequestLog(logger, options.requestSummaryMs);
  if (!options.requestLog) shutdownSignal.addEventListener("abort", () => requestLog.flush(), { once: true });

  const app = new Hono();

  // Marker header and request log (request-log.ts). On node the header goes straight onto the ServerResponse:
  // c.header() would make hono build a web Headers object for every answer (and node-server then
  // convert it back), ~2% of the server's CPU per request.
  app.use("*", async (c, next) => {
    const started = performance.now();
    const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
    if (outgoing && typeof outgoing.setHeader === "function") outgoing.setHeader(AGL_SERVER_HEADER, "agl-ts");
    else c.header(AGL_SERVER_HEADER, "agl-ts");
    await next();
    requestLog.record(c.req.method, c.req.path, c.res.status, performance.now() - started);
    await warnUnseenRefusal(c, logger);
  });

  if (options.token) {
    const expected = Buffer.from(options.token);
    const auth = bearerAuth({
      verifyToken: (token) => {
        const given = Buffer.from(token);
        return given.length === expected.length && timingSafeEqual(given, expected);
      },
      noAuthenticationHeader: { message: { detail: "Missing bearer token", error_type: "Unauthorized" } },
      invalidAuthenticationHeader: {
        message: { detail: "Malformed Authorization header", error_type: "Unauthorized" },
      },
      invalidToken: { message: { detail: "Invalid bearer token", error_type: "Unauthorized" } },
    });
    const dashboardPublic = (path: string) =>
      options.dashboard !== undefined &&
      (path === "/" || path === DASHBOARD_PATH || path.startsWith(`${DASHBOARD_PATH}/`));
    app.use("*", async (c, next) => {
      if (c.req.method === "GET" && c.req.path === "/v1/agl/health") return next();
      if (c.req.method === "GET" && dashboardPublic(c.req.path)) return next();
      return auth(c, next);
    });
  }

  // Before the body is read, so the deadline covers reading it (a slow upload cannot outlast it).
  app.use(
    "*",
    requestDeadline(
      requestTimeoutMs,
      () => new HTTPException(504, { message: `Request took longer than ${requestTimeoutMs} ms` }),
    ),
  );
  app.use(
    "*",
    limitBody(bodyLimitBytes, (c) =>
      c.json(
        { detail: `Request body larger than ${bodyLimitBytes} bytes`, error_type: "PayloadTooLarge" },
        413,
      ),
    ),
  );

  const api = new Hono();
  registerMiscRoutes(api, store);
  registerRolloutRoutes(api, store, { maxWaitSeconds, shutdownSignal });
  app.route("/v1/agl", api);
  // Decompressed OTLP bodies get the same cap as plain ones: inflating is the expensive part.
  registerOtlpRoutes(app, store, { maxDecompressedBytes: bodyLimitBytes, logger });
  registerLegacyRoutes(app, store, { taskTimeoutSeconds: options.legacyTaskTimeoutSeconds ?? 300 });
  if (options.dashboard) {
    app.get(DASHBOARD_PATH, (c) => c.redirect(`${DASHBOARD_PATH}/`));
    app.route(DASHBOARD_PATH, options.dashboard);
    app.get("/", (c) => c.redirect(`${DASHBOARD_PATH}/`));
  }
  // Built at request time from app.routes, so routes registered after this line are listed too.
  app.get("/v1/agl/openapi.json", (c) => c.json(openApiDocument(app, packageVersion(import.meta.url))));

  app.notFound((c) =>
    c.json({ detail: `No route for ${c.req.method} ${c.req.path}`, error_type: "NotFound" }, 404),
  );
  app.onError((error, c) => {
    // Middleware that built its own answer (bearer auth's JSON 401 with WWW-Authenticate) keeps it.
    if (error instanceof HTTPException && error.res) return error.getResponse();
    const { status, body, internal } = errorResponse(error);
    logFailure(logger, error, internal, body.error_type, c.req.method, c.req.path);
    return c.json(body, status);
  });
  return app;
}
