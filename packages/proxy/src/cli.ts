#!/usr/bin/env node
import { exitWithError, installLogging, logFlagOptions, packageVersion, redactSecrets } from "@agl/core";
import { Command, InvalidArgumentError, Option } from "commander";
import pino from "pino";
import pretty from "pino-pretty";
import type { BackendConfig } from "./backends.js";
import type { LLMProxyOptions } from "./options.js";
import { LLMProxy } from "./proxy.js";
import { loadStore } from "./store-loader.js";

const collect = (value: string, previous: string[] = []) => [...previous, value];
const int = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a non-negative integer`);
  return n;
};
const seconds = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0)
    throw new InvalidArgumentError(`${name} must be a number of seconds >= 0`);
  return n;
};

/** `URL[,model=NAME][,weight=W]` → a backend. */
export function parseBackend(spec: string): BackendConfig {
  const [url, ...rest] = spec.split(",");
  const backend: BackendConfig = { url: url! };
  for (const part of rest) {
    const [key, value] = part.split("=");
    if (key === "model" && value) backend.model = value;
    else if (key === "weight" && Number(value) > 0) backend.weight = Number(value);
    else throw new InvalidArgumentError(`bad backend option "${part}" (use model=NAME or weight=N)`);
  }
  return backend;
}

export function buildProgram(): Command {
  const program = buildOptions();
  for (const option of logFlagOptions(Option)) program.addOption(option);
  return program.version(packageVersion(import.meta.url), "-V, --version");
}

function buildOptions(): Command {
  return (
    new Command("agl-proxy")
      .description("OpenAI-compatible LLM gateway that records exact token ids into a LightningStore")
      .option(
        "-b, --backend <url[,model=M][,weight=W]>",
        "an OpenAI-compatible upstream (repeatable; optional with --relay)",
        collect,
      )
      .option("--relay", "relay mode: accept inference workers on /ws/worker (agl-relay-worker)", false)
      .option("--worker-token <token>", "token relay workers present (env AGL_PROXY_WORKER_TOKEN)")
      .option(
        "--wait-for-worker-ms <ms>",
        "relay mode: how long a call waits when no worker is connected",
        int("wait-for-worker-ms"),
        30_000,
      )
      .option(
        "-s, --store <uri>",
        "where spans go: http(s)://store-server, memory:, sqlite:PATH, postgres://...",
        "memory:",
      )
      .option(
        "--store-module <specifier>",
        "module exporting createStore(uri) → LightningStore (overrides the built-in loaders)",
      )
      .option("--store-token <token>", "bearer token for an http store server (env AGL_STORE_TOKEN)")
      .option("--host <host>", "listen address", "127.0.0.1")
      .option("-p, --port <port>", "listen port", int("port"), 8080)
      .option(
        "--public-url <url>",
        "base URL agents on other machines reach this proxy at (env AGL_PROXY_PUBLIC_URL)",
      )
      .option("--model <name>", "public model name (rewrite target and /v1/models)")
      .option("--admin-token <token>", "token for /proxy/* and session routes (env AGL_PROXY_ADMIN_TOKEN)")
      .option("--token-secret <secret>", "HMAC secret for per-attempt tokens (env AGL_PROXY_TOKEN_SECRET)")
      .addOption(new Option("--llm-auth <mode>", "who may call the LLM routes").choices(["none", "token"]))
      .addOption(
        new Option("--pause-mode <mode>", "what paused calls get")
          .choices(["reject", "hold"])
          .default("reject"),
      )
      .option("--retry-after-seconds <s>", "Retry-After of paused calls", seconds("retry-after-seconds"), 5)
      .option("--max-hold-ms <ms>", "hold mode: turn a parked call away after this long", int("max-hold-ms"))
      .option(
        "--trace-header <name>",
        "header carrying a rollout-wide trace id (verl recipe 003)",
        "trace_id",
      )
      .addOption(
        new Option("--unknown-attempts <what>", "calls naming an attempt the store does not have")
          .choices(["reject", "forward"])
          .default("reject"),
      )
      .option("--no-token-ids", "do not inject return_token_ids")
      .option("--no-logprobs", "do not inject logprobs")
      // off by default, as in the library: the parsed attributes carry every number, raw bodies double a span
      .option("--capture-bodies", "also record the raw request/response bodies", false)
      .option("--retries <n>", "extra tries on other backends", int("retries"), 3)
      .option("--timeout-ms <ms>", "per-attempt upstream silence limit", int("timeout"), 300_000)
      .option("--max-body-bytes <n>", "request body limit", int("max-body-bytes"), 16 * 1024 * 1024)
      .option(
        "--response-cache-bytes <n>",
        "in-process cache of /v1/responses conversations (the store keeps them all)",
        int("response-cache-bytes"),
        64 * 1024 * 1024,
      )
      .option(
        "--health-interval-ms <ms>",
        "active health-check period (0 = off)",
        int("health interval"),
        5_000,
      )
  );
}

/** The proxy options the command line gives (everything but the store, which is loaded from `--store`). */
export function proxyOptionsFromArgs(
  o: Record<string, any>,
  env: NodeJS.ProcessEnv = process.env,
): Omit<LLMProxyOptions, "store"> {
  const backends = ((o.backend as string[] | undefined) ?? []).map(parseBackend);
  const workerToken = o.workerToken ?? env.AGL_PROXY_WORKER_TOKEN;
  if (o.relay && !workerToken) throw new Error("--relay needs --worker-token (or AGL_PROXY_WORKER_TOKEN)");
  if (!o.relay && backends.length === 0) throw new Error("give at least one --backend, or --relay");
  return {
    backends,
    relay: o.relay ? { workerToken, waitForWorkerMs: o.waitForWorkerMs } : null,
    host: o.host,
    port: o.port,
    publicUrl: o.publicUrl ?? (env.AGL_PROXY_PUBLIC_URL || null),
    model: o.model ?? null,
    adminToken: o.adminToken ?? env.AGL_PROXY_ADMIN_TOKEN ?? null,
    tokenSecret: o.tokenSecret ?? env.AGL_PROXY_TOKEN_SECRET,
    llmAuth: o.llmAuth,
    pauseMode: o.pauseMode,
    retryAfterSeconds: o.retryAfterSeconds,
    ...(o.maxHoldMs !== undefined ? { maxHoldMs: o.maxHoldMs } : {}),
    traceHeader: o.traceHeader,
    unknownAttempts: o.unknownAttempts,
    returnTokenIds: o.tokenIds,
    logprobs: o.logprobs,
    captureBodies: o.captureBodies,
    retries: o.retries,
    timeoutMs: o.timeoutMs,
    maxBodyBytes: o.maxBodyBytes,
    responseCacheBytes: o.responseCacheBytes,
    healthCheckIntervalMs: o.healthIntervalMs,
  };
}

export async function main(argv = process.argv): Promise<void> {
  const program = buildProgram();
  program.parse(argv);
  const o = program.opts();
  const { logger } = installLogging({
    pino,
    pretty,
    level: o.logLevel,
    format: o.logFormat,
    name: "agl-proxy",
  });
  const store = await loadStore(o.store, {
    module: o.storeModule,
    token: o.storeToken ?? process.env.AGL_STORE_TOKEN ?? null,
  });
  const proxy = new LLMProxy({ store, ...proxyOptionsFromArgs(o) });
  const url = await proxy.start();
  logger.info(
    `agl-proxy listening on ${url} (OpenAI base URL ${url}/v1), recording into ${redactSecrets(o.storeModule ?? o.store)}`,
    { url },
  );
  if (o.relay)
    console.log(`agl-proxy relay mode: workers connect to ${url.replace(/^http/, "ws")}/ws/worker`);
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info(`${signal}, draining`);
    await proxy.stop();
    await store.close?.();
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
}

const invokedDirectly = process.argv[1] && /agl-proxy|cli\.(js|ts)$/.test(process.argv[1]);
if (invokedDirectly) {
  main().catch((error) => exitWithError("agl-proxy", error));
}
