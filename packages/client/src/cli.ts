#!/usr/bin/env node
import { consoleLogger, type LogLevel } from "@agl/core";
/**
 * agl-worker: run an agent against a remote store server.
 *
 *   agl-worker --store http://host:4747 --agent ./agent.js --concurrency 8 [--token T]
 *
 * Prints the run summary as one JSON line on stdout when it stops (SIGINT/SIGTERM, or --max-rollouts).
 */
import { Command, InvalidArgumentError as CommanderArgumentError } from "commander";
import { loadAgent } from "./load-agent.js";
import { Worker } from "./worker.js";

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new CommanderArgumentError("must be a positive integer");
  return n;
}

function nonNegative(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new CommanderArgumentError("must be a number >= 0");
  return n;
}

const program = new Command()
  .name("agl-worker")
  .description("Claim rollouts from an Agent Lightning store server and run an agent on them")
  .requiredOption("--store <url>", "store server URL, e.g. http://127.0.0.1:4747")
  .requiredOption(
    "--agent <module>",
    "module whose default export is the agent (rollout() function or LitAgent)",
  )
  .option("--concurrency <n>", "rollouts run at the same time", positiveInt, 1)
  .option("--token <token>", "bearer token for the store server (default: $AGL_STORE_TOKEN)")
  .option(
    "--proxy-token-secret <secret>",
    "LLM proxy token secret: agents get per-attempt proxy tokens (default: $AGL_PROXY_TOKEN_SECRET)",
  )
  .option("--worker-id <id>", "worker id reported to the store")
  .option("--poll-interval-ms <ms>", "wait between dequeues when the queue is empty", nonNegative, 1000)
  .option(
    "--grace-period-ms <ms>",
    "after a stop signal, how long in-flight rollouts may finish",
    nonNegative,
    30_000,
  )
  .option("--max-rollouts <n>", "stop after claiming this many rollouts", positiveInt)
  .option("--log-level <level>", "debug | info | warn | error | silent", "info")
  .action(async (opts) => {
    const logger = consoleLogger(opts.logLevel as LogLevel);
    const agent = await loadAgent(opts.agent);
    // The flag is visible in `ps`; the env var is the way to keep the secret out of process listings.
    const proxyTokenSecret: string | undefined =
      opts.proxyTokenSecret ?? (process.env.AGL_PROXY_TOKEN_SECRET || undefined);
    const worker = new Worker({
      store: opts.store,
      token: opts.token ?? process.env.AGL_STORE_TOKEN ?? null,
      agent,
      concurrency: opts.concurrency,
      ...(opts.workerId ? { workerId: opts.workerId } : {}),
      ...(proxyTokenSecret ? { proxyTokenSecret } : {}),
      pollIntervalMs: opts.pollIntervalMs,
      gracePeriodMs: opts.gracePeriodMs,
      ...(opts.maxRollouts ? { maxRollouts: opts.maxRollouts } : {}),
      logger,
    });
    const server = await worker.describeServer();
    // Always printed (stderr, whatever the log level): which server a worker talks to decides which
    // features it has (see LightningStoreClient.serverInfo).
    process.stderr.write(
      `agl-worker ${worker.workerId}: store ${opts.store} is ${server ? `an ${server.description}` : "not identified yet"}; concurrency ${opts.concurrency}\n`,
    );
    const summary = await worker.run();
    // Exit explicitly: an abandoned agent (past the grace period) may still hold timers or sockets.
    process.stdout.write(`${JSON.stringify(summary)}\n`, () => process.exit(0));
  });

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`agl-worker: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
