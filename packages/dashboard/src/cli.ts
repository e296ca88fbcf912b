#!/usr/bin/env node
/**
 * agl-dashboard: the dashboard for any Agent Lightning store server (agl-store or Python's).
 *
 *   agl-dashboard --store http://127.0.0.1:4747 [--metrics run/metrics.jsonl] [--port 4748]
 *
 * The page asks for the store's bearer token when the store wants one.
 */
import { exitWithError, installLogging, logFlagOptions, packageVersion, redactSecrets } from "@agl/core";
import { Command, InvalidArgumentError, Option } from "commander";
import pino from "pino";
import pretty from "pino-pretty";
import { startDashboardServer } from "./server/standalone.js";

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError("must be an integer in [0, 65535]");
  return n;
}

function storeUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError("must be an http(s) URL, e.g. http://127.0.0.1:4747");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new InvalidArgumentError("must be http or https");
  return value;
}

const program = new Command()
  .name("agl-dashboard")
  .description("Serve the Agent Lightning dashboard for a store server")
  .version(packageVersion(import.meta.url), "-V, --version")
  .requiredOption("--store <url>", "the store server's URL", storeUrl)
  .option("--metrics <file>", "a trainer's metrics log (JSON lines) for the Training page")
  .option("--host <host>", "interface to listen on", "127.0.0.1")
  .option("--port <port>", "port (0 picks a free one)", port, 4748)
  .action(async (opts) => {
    const { logger } = installLogging({
      pino,
      pretty,
      level: opts.logLevel,
      format: opts.logFormat,
      name: "agl-dashboard",
    });
    const server = await startDashboardServer({
      storeUrl: opts.store,
      metricsFile: opts.metrics ?? null,
      host: opts.host,
      port: opts.port,
    });
    logger.info(`dashboard listening on ${server.url}`, {
      url: server.url,
      store: redactSecrets(opts.store),
    });
    const stop = () => void server.close().then(() => process.exit(0));
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });

for (const option of logFlagOptions(Option)) program.addOption(option);

program.parseAsync(process.argv).catch((error: unknown) => exitWithError("agl-dashboard", error));
