import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { InvalidArgumentError, parseOrThrow } from "@agl/core";
import * as tf from "@tensorflow/tfjs";
import { z } from "zod";
import type { GenerateRequest, GenerateResult, TokenEvent } from "../generate/request.js";
import type { CausalLM } from "../model/causal-lm.js";
import { type PolicyBundle, type ServeFn, startPolicyServer } from "../ppo/serving.js";
import { HfTokenizer } from "../tokenizer/hf-tokenizer.js";
import type { TextTokenizer } from "../tokenizer/text-tokenizer.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { PolicyWorkerError } from "./errors.js";
import { PooledGenerator } from "./pooled-generator.js";
import type {
  FromWorker,
  TaskResults,
  TokenizerSpec,
  ToWorker,
  WireGenerateRequest,
  WorkerInit,
  WorkerTask,
} from "./protocol.js";
import { broadcastWeights, modelSpec } from "./replica.js";

export const PolicyWorkersOptionsSchema = z
  .object({
    /** Worker threads, each with its own replica and tfjs instance (default: the number of CPU cores). */
    workers: z.number().int().min(1).max(64).optional(),
    /** The workers' tfjs backend (default: the main thread's; "wasm" or "cpu"). */
    backend: z.string().min(1).optional(),
    /** Most sequences a worker decodes together (the Generator's `maxBatchSize`, default 64). */
    maxBatchSize: z.number().int().min(1).optional(),
    /** How long a worker may take to start (load tfjs, build its replica); default 120 s. */
    startTimeoutMs: z.number().int().positive().optional(),
  })
  .strict();
export type PolicyWorkersOptions = z.input<typeof PolicyWorkersOptionsSchema>;

/** What the pool replicates: the model being trained and its tokenizer (for generation). */
export type PolicyWorkersSource = Pick<PolicyBundle, "model" | "tokenizer">;

interface Pending {
  worker: number;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
  onToken?: (index: number, event: TokenEvent) => void;
}

/**
 * Where the worker entry is: the built `policy-worker.js` next to this bundle, or, when running from the
 * TypeScript sources (vitest, tsx), `worker.ts` imported after registering tsx's loader in the worker
 * (loader flags in a Worker's execArgv are not applied to it on Node 20).
 */
function workerEntry(): URL {
  if (!import.meta.url.endsWith(".ts")) return new URL("./policy-worker.js", import.meta.url);
  const entry = new URL("./worker.ts", import.meta.url).href;
  const boot = `const { register } = await import(${JSON.stringify(tsxApi())}); register(); await import(${JSON.stringify(entry)});`;
  return new URL(`data:text/javascript,${encodeURIComponent(boot)}`);
}

/** The ESM build of tsx's register API, found from the working directory or from this package. */
function tsxApi(): string {
  for (const from of [join(process.cwd(), "package.json"), fileURLToPath(import.meta.url)]) {
    try {
      const esm = createRequire(from)
        .resolve("tsx/esm/api")
        .replace(/\.cjs$/, ".mjs");
      if (existsSync(esm)) return pathToFileURL(esm).href;
    } catch {
      // not resolvable from there
    }
  }
  throw new PolicyWorkerError("start_failed", "running from TypeScript sources needs tsx installed");
}

function tokenizerSpec(tokenizer: TextTokenizer): TokenizerSpec {
  if (tokenizer instanceof Tokenizer) return { kind: "char", config: tokenizer.toConfig() };
  if (tokenizer instanceof HfTokenizer) return { kind: "hf", files: tokenizer.files };
  throw new PolicyWorkerError("unsupported_model", "the tokenizer must be a Tokenizer or an HfTokenizer");
}

/** The backend name a worker selects: the explicit option, else the main thread's wasm/cpu backend. */
function workerBackend(option: string | undefined): string {
  if (option) return option;
  const main = tf.getBackend();
  if (main === "wasm" || main === "cpu") return main;
  throw new InvalidArgumentError(
    "backend",
    `the main thread runs the "${main}" backend; worker threads help the single-threaded wasm/cpu backends (a native or GPU backend already uses the machine), pass backend explicitly to use them anyway`,
  );
}

/**
 * A pool of worker threads holding replicas of the policy, for using every core with the single-threaded
 * wasm/cpu backends: generation (`serve`, a ServeFn for PPO and evaluation) and data-parallel gradients
 * (`sft(..., { workers })`, `new PPO({ ..., workers })`). The main thread keeps the model of record and
 * the optimizer; after each optimizer step the new weights are broadcast (`syncWeights`).
 */
export class PolicyWorkers {
  readonly model: CausalLM;
  readonly tokenizer: TextTokenizer;
  /** The worker threads (index = the `worker` of errors). */
  readonly threads: readonly Worker[];
  private readonly pending = new Map<number, Pending>();
  private readonly loads: number[];
  private readonly tasks: number[];
  private nextId = 1;
  private failure: PolicyWorkerError | undefined;
  private closing = false;

  private constructor(source: PolicyWorkersSource, threads: Worker[]) {
    this.model = source.model;
    this.tokenizer = source.tokenizer;
    this.threads = threads;
    this.loads = threads.map(() => 0);
    this.tasks = threads.map(() => 0);
    threads.forEach((t, i) => {
      t.on("message", (m: FromWorker) => this.onMessage(m));
      t.on("error", (e) =>
        this.fail(new PolicyWorkerError("worker_exited", `crashed: ${e.message}`, { worker: i, cause: e })),
      );
      t.on("messageerror", (e) =>
        this.fail(
          new PolicyWorkerError("worker_exited", `unreadable message: ${e.message}`, { worker: i, cause: e }),
        ),
      );
      t.on("exit", (code) => {
        if (!this.closing)
          this.fail(new PolicyWorkerError("worker_exited", `exited with code ${code}`, { worker: i }));
      });
    });
    // After the listeners (adding one refs the thread again).
    for (const t of threads) t.unref();
  }

  /** Start `workers` threads, each with a replica of `source.model`; resolves when all are ready. */
  static async start(
    source: PolicyWorkersSource,
    options: PolicyWorkersOptions = {},
  ): Promise<PolicyWorkers> {
    const o = parseOrThrow(PolicyWorkersOptionsSchema, options, "workers options");
    const init: WorkerInit = {
      backend: workerBackend(o.backend),
      model: modelSpec(source.model),
      tokenizer: tokenizerSpec(source.tokenizer),
      maxBatchSize: o.maxBatchSize,
    };
    const url = workerEntry();
    const n = o.workers ?? Math.max(1, availableParallelism());
    const threads = Array.from({ length: n }, () => new Worker(url, { workerData: init }));
    try {
      await Promise.all(threads.map((t, i) => waitReady(t, i, o.startTimeoutMs ?? 120_000)));
    } catch (error) {
      await Promise.all(threads.map((t) => t.terminate()));
      throw error;
    }
    return new PolicyWorkers(source, threads);
  }

  get size(): number {
    return this.threads.length;
  }

  /** Why the pool is unusable (a worker died, or it was closed), if it is. */
  get error(): PolicyWorkerError | undefined {
    return this.failure;
  }

  /**
   * A ServeFn (for `new PPO({ serve })`, `evaluatePolicy`): an OpenAI-compatible PolicyServer in this
   * thread whose generation runs on the workers (`PooledGenerator`).
   */
  readonly serve: ServeFn = async (policy, { modelName }) => {
    if (policy.model !== this.model) {
      throw new InvalidArgumentError("policy", "serve the model the worker pool was started with");
    }
    await this.syncWeights();
    return startPolicyServer(policy, modelName, new PooledGenerator(this));
  };

  /** Send the main model's current weights to every worker (after an optimizer step or any other change). */
  async syncWeights(): Promise<void> {
    const weights = broadcastWeights(this.model);
    await Promise.all(this.threads.map((_, i) => this.call(i, { op: "setWeights", weights })));
  }

  /** The worker with the fewest running tasks and sequences. */
  leastLoaded(): number {
    let best = 0;
    for (let i = 1; i < this.loads.length; i++)
      if ((this.loads[i] as number) < (this.loads[best] as number)) best = i;
    return best;
  }

  /** Run `task` on worker `worker`; `weight` counts towards the worker's load while it runs. */
  call<K extends WorkerTask["op"]>(
    worker: number,
    task: Extract<WorkerTask, { op: K }>,
    weight = 1,
  ): Promise<TaskResults[K]> {
    return this.send(worker, task, weight).promise as Promise<TaskResults[K]>;
  }

  /**
   * Generate a group of sequences on worker `worker` (its Generator admits them together): token events
   * stream back to each request's `onToken`, its `signal` aborts it there.
   */
  async generate(worker: number, requests: readonly GenerateRequest[]): Promise<GenerateResult[]> {
    const wire: WireGenerateRequest[] = requests.map(({ signal, onToken, promptIds, stop, ...params }) => ({
      ...params,
      promptIds: [...promptIds],
      ...(stop ? { stop: [...stop] } : {}),
      stream: onToken !== undefined,
      aborted: signal?.aborted === true,
    }));
    const { id, promise } = this.send(worker, { op: "generate", requests: wire }, requests.length, (i, e) =>
      requests[i]?.onToken?.(e),
    );
    const unlisten = requests.map((r, index) => {
      const onAbort = () => {
        if (!this.failure) this.threads[worker]?.postMessage({ type: "abort", id, index } satisfies ToWorker);
      };
      r.signal?.addEventListener("abort", onAbort, { once: true });
      return () => r.signal?.removeEventListener("abort", onAbort);
    });
    try {
      return (await promise) as GenerateResult[];
    } finally {
      for (const u of unlisten) u();
    }
  }

  private send(
    worker: number,
    task: WorkerTask,
    weight: number,
    onToken?: (index: number, event: TokenEvent) => void,
  ): { id: number; promise: Promise<unknown> } {
    const id = this.nextId++;
    if (this.failure) return { id, promise: Promise.reject(this.failure) };
    this.loads[worker] = (this.loads[worker] as number) + weight;
    this.busy(worker, 1);
    const promise = new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { worker, resolve, reject, onToken });
      this.threads[worker]?.postMessage({ type: "task", id, task } satisfies ToWorker);
    }).finally(() => {
      this.loads[worker] = (this.loads[worker] as number) - weight;
      this.busy(worker, -1);
    });
    return { id, promise };
  }

  /**
   * Run `run` over `items` on all workers, each taking the next item when it is free; results in item
   * order. The first failure rejects (items not yet started are then skipped).
   */
  async map<T, R>(items: readonly T[], run: (item: T, worker: number) => Promise<R>): Promise<R[]> {
    const out = new Array<R>(items.length);
    let next = 0;
    let failed = false;
    await Promise.all(
      this.threads.map(async (_, w) => {
        while (!failed && next < items.length) {
          const i = next++;
          try {
            out[i] = await run(items[i] as T, w);
          } catch (error) {
            failed = true;
            throw error;
          }
        }
      }),
    );
    return out;
  }

  /** Terminate the workers; pending and later calls reject with a `closed` PolicyWorkerError. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.fail(new PolicyWorkerError("closed", "the worker pool was closed"));
    await Promise.all(this.threads.map((t) => t.terminate()));
  }

  /**
   * An idle worker does not keep the process alive (a script that forgets `close()` still exits); one
   * with tasks in flight does (the result is awaited).
   */
  private busy(worker: number, delta: number): void {
    const n = (this.tasks[worker] as number) + delta;
    this.tasks[worker] = n;
    if (delta > 0 && n === 1) this.threads[worker]?.ref();
    else if (n === 0) this.threads[worker]?.unref();
  }

  private onMessage(m: FromWorker): void {
    if (m.type === "ready") return;
    const p = this.pending.get(m.id);
    if (!p) return;
    if (m.type === "token") {
      p.onToken?.(m.index, m.event);
      return;
    }
    this.pending.delete(m.id);
    if (m.type === "result") p.resolve(m.result);
    else {
      const cause = Object.assign(new Error(m.message), { stack: m.stack });
      p.reject(new PolicyWorkerError("task_failed", m.message, { worker: p.worker, cause }));
    }
  }

  private fail(error: PolicyWorkerError): void {
    if (this.failure) return;
    this.failure = error;
    for (const p of this.pending.values()) p.reject(error);
    this.pending.clear();
    if (!this.closing) for (const t of this.threads) void t.terminate();
  }
}

/** Start a pool of worker threads holding replicas of the policy (see `PolicyWorkers`). */
export function startPolicyWorkers(
  source: PolicyWorkersSource,
  options: PolicyWorkersOptions = {},
): Promise<PolicyWorkers> {
  return PolicyWorkers.start(source, options);
}

function waitReady(thread: Worker, index: number, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (error?: unknown) => {
      clearTimeout(timer);
      thread.off("message", onMessage);
      thread.off("error", onError);
      thread.off("exit", onExit);
      if (error) reject(error);
      else resolve();
    };
    const onMessage = (m: FromWorker) => {
      if (m.type === "ready") done();
    };
    const onError = (e: Error) =>
      done(
        new PolicyWorkerError("start_failed", `failed to start: ${e.message}`, { worker: index, cause: e }),
      );
    const onExit = (code: number) =>
      done(
        new PolicyWorkerError("start_failed", `exited with code ${code} while starting`, { worker: index }),
      );
    const timer = setTimeout(
      () => done(new PolicyWorkerError("start_failed", `not ready after ${timeoutMs} ms`, { worker: index })),
      timeoutMs,
    );
    thread.on("message", onMessage);
    thread.on("error", onError);
    thread.on("exit", onExit);
  });
}
