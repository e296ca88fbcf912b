#!/usr/bin/env node
/**
 * agl-store: serve a LightningStore over HTTP (Agent Lightning v0.3 REST + OTLP + legacy task API).
 *
 *   agl-store --db sqlite:./agl.db --port 4747 --token s3cret
 *   agl-store --db postgres://user@host/db
 *   agl-store --db memory
 *
 * Logs go to stderr (pino: JSON lines, or readable on a terminal; --log-level / AGL_LOG_LEVEL), the
 * first line says which store was opened. SIGINT/SIGTERM stop accepting requests, let in-flight ones
 * finish, then close the database. Bad flags exit 1 with one line naming the flag.
 */
import { exitWithError, installLogging, logFlagOptions, packageVersion } from "@agl/core";
import { Command, InvalidArgumentError, Option } from "commander";
import pino from "pino";
import pretty from "pino-pretty";
import { loadDashboard } from "./dashboard-loader.js";
import { describeStoreUri, openStore, parseStoreUri } from "./index.js";
import { silentServerLogger } from "./server/logging.js";
import { type StoreServer, startStoreServer } from "./server/server.js";

function intInRange(min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`must be an integer in [${min}, ${max}]`);
    return n;
  };
}

function positiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("must be a positive number");
  return n;
}

function storeUri(value: string): string {
  try {
    parseStoreUri(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
  return value;
}

const program = new Command()
  .name("agl-store")
  .description("Serve an Agent Lightning store over HTTP")
  .version(packageVersion(import.meta.url), "-V, --version")
  .option(
    "--db <uri>",
    "memory | sqlite:<path> | a path with a / or an extension (SQLite) | postgres://...",
    storeUri,
    "sqlite:./agl.db",
  )
  .option("--host <host>", "interface to listen on", "127.0.0.1")
  .option("--port <port>", "port (0 picks a free one)", intInRange(0, 65535), 4747)
  .option("--token <token>", "require this bearer token (default: $AGL_STORE_TOKEN; none = open)")
  .option(
    "--public-url <url>",
    "URL clients on other machines use, logged at start (default: $AGL_STORE_PUBLIC_URL)",
  )
  .option("--body-limit-mb <mb>", "largest request body", positiveNumber, 32)
  .option("--request-timeout-ms <ms>", "per-request deadline", positiveNumber, 60_000)
  .option(
    "--max-wait-seconds <s>",
    "longest server-side wait of POST /v1/agl/waits/rollouts",
    positiveNumber,
    20,
  )
  .option("--quiet", "no request logs (start-up and shutdown lines stay)")
  .option(
    "--no-dashboard",
    "do not serve the web dashboard at /dashboard (served when @agl/dashboard is installed)",
  )
  .option("--metrics <file>", "a trainer's metrics log (JSON lines) for the dashboard's Training page");

for (const option of logFlagOptions(Option)) program.addOption(option);

program.action(async (opts) => {
  const {
    logger: cliLogger,
    level,
    announce,
  } = installLogging({
    pino,
    pretty,
    level: opts.logLevel,
    format: opts.logFormat,
    name: "agl-store",
  });
  const logger = opts.quiet ? silentServerLogger : cliLogger;
  const store = await openStore(opts.db);
  cliLogger.info(`opened ${describeStoreUri(opts.db)}`, { db: describeStoreUri(opts.db) });
  const token: string | null = opts.token ?? process.env.AGL_STORE_TOKEN ?? null;
  const dashboard = opts.dashboard ? await loadDashboard({ token, metricsFile: opts.metrics ?? null }) : null;
  // Signals are handled from before the server starts: a supervisor (or a test) may stop the process
  // as soon as it reads the listening line, which is written while the server starts.
  let server: StoreServer | undefined;
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      cliLogger.warn(`second ${signal}, exiting now`);
      process.exit(130);
    }
    stopping = true;
    cliLogger.info("shutting down", { signal });
    (server ? server.close() : store.close()).then(
      () => process.exit(0),
      (error: unknown) => {
        exitWithError("agl-store", new Error(`shutdown failed: ${String(error)}`));
      },
    );
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  server = await startStoreServer({
    store,
    host: opts.host,
    port: opts.port,
    token,
    dashboard: dashboard ?? undefined,
    bodyLimitBytes: Math.round(opts.bodyLimitMb * 1024 * 1024),
    requestTimeoutMs: opts.requestTimeoutMs,
    maxWaitSeconds: opts.maxWaitSeconds,
    logger,
    closeStore: true,
    publicUrl: opts.publicUrl ?? (process.env.AGL_STORE_PUBLIC_URL || null),
  });
  // The listening line (the server logs it at info) is printed whatever the level: scripts read the URL.
  if (opts.quiet || (level !== "debug" && level !== "info")) {
    pino({ name: "agl-store" }, pino.destination({ fd: 2, sync: true })).info(
      { url: server.url, ...(server.publicUrl !== server.url ? { public_url: server.publicUrl } : {}) },
      "store server listening",
    );
  }
  // Whatever the level: where to open the dashboard is the first thing a person needs.
  if (dashboard) {
    const dashboardUrl = `${server.publicUrl}/dashboard/`;
    announce(`dashboard at ${dashboardUrl}`, { dashboard_url: dashboardUrl });
  } else if (opts.dashboard) {
    cliLogger.info("no dashboard: @agl/dashboard is not installed next to @agl/store");
  }
});

program.parseAsync(process.argv).catch((error: unknown) => exitWithError("agl-store", error));
