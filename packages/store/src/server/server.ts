import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { InvalidArgumentError, type LightningStore } from "@agl/core";
import { serve } from "@hono/node-server";
import {
  AGL_SERVER_HEADER,
  createStoreApp,
  DEFAULT_BODY_LIMIT_BYTES,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type StoreAppOptions,
} from "./app.js";
import { fastRoutes } from "./fast-routes.js";
import { jsonLinesLogger } from "./logging.js";
import { RequestLog } from "./request-log.js";
import { checkStoreServerOptions } from "./server-options.js";

export interface StoreServerOptions extends Omit<StoreAppOptions, "shutdownSignal" | "requestLog"> {
  store: LightningStore;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 4747; 0 picks a free port. */
  port?: number;
  /** How long close() lets in-flight requests finish before cutting connections. Default 10 s. */
  closeTimeoutMs?: number;
  /** Close the store too when the server closes. Default false (the caller owns the store). */
  closeStore?: boolean;
  /**
   * The URL workers and trainers on other machines use (e.g. "http://store-1:4747"), logged with the
   * listening line and returned as `publicUrl`. Default: `url`.
   */
  publicUrl?: string | null;
  /** Most open connections at once (long-poll waits each hold one); more are refused at accept. Default 10,000. */
  maxConnections?: number;
  /** Time a client has to send its request headers, in ms. Default 10 s. */
  headersTimeoutMs?: number;
}

export interface StoreServer {
  /** The bound address, e.g. http://127.0.0.1:4747 (no trailing slash, no /v1/agl). */
  readonly url: string;
  /** What to give clients elsewhere: the `publicUrl` option, else `url`. */
  readonly publicUrl: string;
  readonly port: number;
  /** Stop accepting connections, let in-flight requests finish (long waits answer early), then release. */
  close(): Promise<void>;
}

/** Start the store server on node:http (via @hono/node-server). Resolves once it is listening. */
export async function startStoreServer(options: StoreServerOptions): Promise<StoreServer> {
  checkStoreServerOptions(options);
  const {
    store,
    host = "127.0.0.1",
    port = 4747,
    closeTimeoutMs = 10_000,
    closeStore = false,
    publicUrl: publicOption = null,
    maxConnections = 10_000,
    headersTimeoutMs = 10_000,
    ...appOptions
  } = options;
  if (publicOption !== null && !/^https?:\/\/[^/\s]+\/?$/.test(publicOption)) {
    throw new InvalidArgumentError(
      "publicUrl",
      "must be an http(s) URL of the server root, e.g. http://store-1:4747",
    );
  }
  const requestTimeoutMs = appOptions.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const logger = appOptions.logger ?? jsonLinesLogger();
  const shutdown = new AbortController();
  const requestLog = new RequestLog(logger, appOptions.requestSummaryMs);
  const app = createStoreApp(store, { ...appOptions, logger, requestLog, shutdownSignal: shutdown.signal });

  const server = await new Promise<Server>((resolve, reject) => {
    // Slow clients cannot hold connections: headers and the whole request body must arrive within
    // their timeouts (Node answers 408 and closes), checked every second rather than every 30 s.
    const serverOptions = {
      headersTimeout: Math.min(headersTimeoutMs, requestTimeoutMs),
      requestTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, requestTimeoutMs),
    };
    // The hot requests of every rollout skip hono (fast-routes.ts); the app answers everything else.
    const fast = fastRoutes({
      store,
      token: appOptions.token,
      bodyLimitBytes: appOptions.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES,
      requestTimeoutMs,
      requestLog,
      logger,
      serverHeader: AGL_SERVER_HEADER,
    });
    const createFront = (options: ServerOptions, hono: (req: IncomingMessage, res: ServerResponse) => void) =>
      createServer(options, (req, res) => fast(req, res) || hono(req, res));
    const s = serve(
      { fetch: app.fetch, hostname: host, port, serverOptions, createServer: createFront as never },
      () => resolve(s as Server),
    ) as Server;
    s.once("error", reject);
  });
  // Idle keep-alive sockets must not hold close() open; active ones finish their request first.
  server.keepAliveTimeout = 5_000;
  server.maxConnections = maxConnections;
  const address = server.address() as AddressInfo;
  const urlHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${urlHost}:${address.port}`;
  const publicUrl = publicOption?.replace(/\/+$/, "") ?? url;
  logger.info("store server listening", publicOption === null ? { url } : { url, public_url: publicUrl });
  if (!appOptions.token && !isLoopback(address.address)) {
    logger.warn(
      `store server on ${url} has no token: anyone who can reach it can read and change the store, resources (and any api_key in them) included; pass --token / AGL_STORE_TOKEN`,
      { url },
    );
  }

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      shutdown.abort();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Connections that finish their in-flight request go idle later; sweep them until closed.
      server.closeIdleConnections();
      const sweep = setInterval(() => server.closeIdleConnections(), 25);
      const timer = setTimeout(() => server.closeAllConnections(), closeTimeoutMs);
      timer.unref();
      await closed;
      clearInterval(sweep);
      clearTimeout(timer);
      if (closeStore) await store.close();
      requestLog.flush();
      logger.info("store server closed", { url });
    })();
    return closing;
  };
  return { url, publicUrl, port: address.port, close };
}

function isLoopback(address: string): boolean {
  return /^127\./.test(address) || address === "::1" || address === "::ffff:127.0.0.1";
}
