#!/usr/bin/env node
import { exitWithError, installLogging, logFlagOptions, packageVersion } from "@agl/core";
import { Command, Option } from "commander";
import pino from "pino";
import pretty from "pino-pretty";
import { startRelayWorker } from "./relay/relay-worker.js";

const collect = (value: string, previous: string[] = []) => [...previous, value];
const int = (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`not a non-negative integer: ${value}`);
  return n;
};

export function buildWorkerProgram(): Command {
  const program = new Command("agl-relay-worker")
    .description(
      "Serve a local inference engine to a relay-mode agl-proxy by dialing out to it (NAT/firewall friendly)",
    )
    .requiredOption("--proxy <ws-url>", "the proxy, ws(s)://host:port (its /ws/worker endpoint)")
    .requiredOption(
      "--upstream <url>",
      "the local engine's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1",
    )
    .option("--token <token>", "the proxy's worker token (env AGL_RELAY_WORKER_TOKEN)")
    .option(
      "--worker-id <id>",
      "stable id (keeps rollouts on this worker across reconnects); default host-pid",
    )
    .option("--model <name>", "model to announce (repeatable); default: the engine's GET /models", collect)
    .option("--upstream-api-key <key>", "bearer token for the engine (env AGL_UPSTREAM_API_KEY)")
    .option("--backoff-base-ms <ms>", "first reconnect delay", int, 500)
    .option("--backoff-max-ms <ms>", "longest reconnect delay", int, 30_000);
  for (const option of logFlagOptions(Option)) program.addOption(option);
  return program.version(packageVersion(import.meta.url), "-V, --version");
}

export async function main(argv = process.argv): Promise<void> {
  const o = buildWorkerProgram().parse(argv).opts();
  const { logger, announce } = installLogging({
    pino,
    pretty,
    level: o.logLevel,
    format: o.logFormat,
    name: "agl-relay-worker",
  });
  const token = o.token ?? process.env.AGL_RELAY_WORKER_TOKEN;
  if (!token) throw new Error("--token (or AGL_RELAY_WORKER_TOKEN) is required");
  const worker = startRelayWorker({
    proxy: o.proxy,
    upstream: o.upstream,
    token,
    workerId: o.workerId,
    models: o.model,
    upstreamApiKey: o.upstreamApiKey ?? process.env.AGL_UPSTREAM_API_KEY,
    backoffBaseMs: o.backoffBaseMs,
    backoffMaxMs: o.backoffMaxMs,
    logger,
  });
  await worker.ready;
  // Printed whatever the level (stderr: logs there, nothing on stdout): scripts wait for it.
  announce(`agl-relay-worker ${worker.workerId} serving ${o.upstream} to ${o.proxy}`, {
    worker_id: worker.workerId,
    upstream: o.upstream,
    proxy: o.proxy,
  });
  const shutdown = async () => {
    await worker.stop();
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown());
  process.on("SIGTERM", () => void shutdown());
}

const invokedDirectly =
  process.argv[1] && /agl-relay-worker|relay-worker-cli\.(js|ts)$/.test(process.argv[1]);
if (invokedDirectly) {
  main().catch((error: unknown) => exitWithError("agl-relay-worker", error));
}
