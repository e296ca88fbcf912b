#!/usr/bin/env node
import { exitWithError, httpUrlProblem, installLogging, logFlagOptions, packageVersion } from "@agl/core";
/**
 * agl-worker: run an agent against a remote store server.
 *
 *   agl-worker --store http://host:4747 --agent ./agent.ts --concurrency 8 [--token T]
 *
 * Logs go to stderr; the run summary is one JSON line on stdout when it stops (SIGINT/SIGTERM, or
 * --max-rollouts), so `agl-worker ... | jq` works. Exit codes: 0 done, 1 error (one line on stderr),
 * 130 second signal.
 */
import { Command, InvalidArgumentError as CommanderArgumentError, Option } from "commander";
import pino from "pino";
import pretty from "pino-pretty";
import { loadAgent } from "./load-agent.js";
import { DEFAULT_WORKER_TIMEOUT_SECONDS, Worker } from "./worker.js";

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

function storeUrl(value: string): string {
  const problem = httpUrlProblem(value, "store URL");
  if (problem) throw new CommanderArgumentError(problem);
  return value;
}

const program = new Command()
  .name("agl-worker")
  .description("Claim rollouts from an Agent Lightning store server and run an agent on them")
  .version(packageVersion(import.meta.url), "-V, --version")
  .requiredOption("--store <url>", "store server URL, e.g. http://127.0.0.1:4747", storeUrl)
  .requiredOption(
    "--agent <module>",
    "module (.js, .mjs or .ts) whose default export is the agent (rollout() function or LitAgent)",
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
    "after a stop signal (or when the store ends an attempt), how long an agent may take to return",
    nonNegative,
    30_000,
  )
  .addOption(
    new Option(
      "--timeout-seconds <s>",
      "deadline of rollouts that set no timeout_seconds of their own (0 = none)",
    )
      .argParser(nonNegative)
      .default(DEFAULT_WORKER_TIMEOUT_SECONDS),
  )
  .option(
    "--startup-timeout-seconds <s>",
    "how long to keep trying to reach the store at start",
    nonNegative,
    30,
  )
  .option("--max-rollouts <n>", "stop after claiming this many rollouts", positiveInt)
  .action(async (opts) => {
    const { logger, announce } = installLogging({
      pino,
      pretty,
      level: opts.logLevel,
      format: opts.logFormat,
      name: "agl-worker",
    });
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
      defaultTimeoutSeconds: opts.timeoutSeconds === 0 ? null : opts.timeoutSeconds,
      startupTimeoutSeconds: opts.startupTimeoutSeconds,
      ...(opts.maxRollouts ? { maxRollouts: opts.maxRollouts } : {}),
      logger,
    });
    // Probe first: a refused token or an unreachable store ends here with one line.
    await worker.probe();
    const server = await worker.describeServer();
    // Always printed (stderr, whatever the log level): which server a worker talks to decides which
    // features it has (see LightningStoreClient.serverInfo).
    announce(
      `agl-worker ${worker.workerId}: store ${opts.store} is ${server ? `an ${server.description}` : "not identified yet"}; concurrency ${opts.concurrency}`,
      {
        worker_id: worker.workerId,
        store: opts.store,
        server: server?.description ?? null,
        concurrency: opts.concurrency,
      },
    );
    const summary = await worker.run();
    logger.info(
      `worker ${worker.workerId} done: ${summary.claimed} claimed, ${summary.succeeded} succeeded, ${summary.failed} failed, ${summary.stale} ended by the store, ${summary.abandoned} abandoned`,
    );
    // Exit explicitly: an abandoned agent (past the grace period) may still hold timers or sockets.
    process.stdout.write(`${JSON.stringify(summary)}\n`, () => process.exit(0));
  });

for (const option of logFlagOptions(Option)) program.addOption(option);

program.parseAsync(process.argv).catch((error: unknown) => exitWithError("agl-worker", error));
