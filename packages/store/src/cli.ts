#!/usr/bin/env node
/**
 * agl-store: serve a LightningStore over HTTP (Agent Lightning v0.3 REST + OTLP + legacy task API).
 *
 *   agl-store --db sqlite:./agl.db --port 4747 --token s3cret
 *   agl-store --db postgres://user@host/db
 *   agl-store --db memory
 *
 * Logs are JSON lines on stderr. SIGINT/SIGTERM stop accepting requests, let in-flight ones finish,
 * then close the database.
 */
import { Command, InvalidArgumentError } from "commander";
import { loadDashboard } from "./dashboard-loader.js";
import { openStore } from "./index.js";
import { jsonLinesLogger, silentServerLogger } from "./server/logging.js";
import { startStoreServer } from "./server/server.js";

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

const program = new Command()
  .name("agl-store")
  .description("Serve an Agent Lightning store over HTTP")
  .option(
    "--db <uri>",
    "sqlite:<path> | postgres://... | memory (a bare path means SQLite)",
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
  .option("--quiet", "no request logs")
  .option(
    "--no-dashboard",
    "do not serve the web dashboard at /dashboard (served when @agl/dashboard is installed)",
  )
  .option("--metrics <file>", "a trainer's metrics log (JSON lines) for the dashboard's Training page")
  .action(async (opts) => {
    const logger = opts.quiet ? silentServerLogger : jsonLinesLogger();
    const store = await openStore(opts.db);
    const token: string | null = opts.token ?? process.env.AGL_STORE_TOKEN ?? null;
    const dashboard = opts.dashboard
      ? await loadDashboard({ token, metricsFile: opts.metrics ?? null })
      : null;
    const server = await startStoreServer({
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
    if (opts.quiet) {
      // Keep the startup line even when quiet: scripts read the URL from it.
      process.stderr.write(
        `${JSON.stringify({ level: "info", msg: "store server listening", url: server.url, ...(server.publicUrl !== server.url ? { public_url: server.publicUrl } : {}) })}\n`,
      );
    }
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) {
        process.stderr.write(`agl-store: second ${signal}, exiting now\n`);
        process.exit(130);
      }
      stopping = true;
      logger.info("shutting down", { signal });
      server.close().then(
        () => process.exit(0),
        (error: unknown) => {
          process.stderr.write(`agl-store: shutdown failed: ${String(error)}\n`);
          process.exit(1);
        },
      );
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`agl-store: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
