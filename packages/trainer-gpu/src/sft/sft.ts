import { readFile } from "node:fs/promises";
import { InvalidArgumentError, parseOrThrow } from "@agl/core";
import * as tf from "@tensorflow/tfjs";
import cliProgress from "cli-progress";
import { z } from "zod";
import { createRng } from "../generate/sampling.js";
import type { CausalLM } from "../model/causal-lm.js";
import { lengthBalancedMicroBatches } from "../model/micro-batches.js";
import { sftGradsOnWorkers } from "../parallel/data-parallel.js";
import type { PolicyWorkers } from "../parallel/pool.js";
import { addGrads } from "../ppo/optim.js";
import { fitMicroBatch } from "../pretrained/memory-fit.js";
import type { ChatMessage, ToolDefinition } from "../tokenizer/messages.js";
import type { ChatEncoder } from "../tokenizer/text-tokenizer.js";
import { encodeExample, type RawSftExample, summarizeSkips } from "./examples.js";
import { padRows, sftMicroGrads, targetCount } from "./micro-batch.js";

/** One transcript in OpenAI chat format (the adapter's `TraceToMessages` output has this shape). */
export interface SftExample {
  messages: ChatMessage[];
  tools?: ToolDefinition[] | null;
}

export interface SftOptions {
  template: ChatEncoder;
  /** Passes over the data (default 1); ignored when `steps` is set. */
  epochs?: number;
  /** Exact number of optimizer steps (cycling through reshuffled data). */
  steps?: number;
  batchSize?: number;
  /** Adam learning rate (default 2e-3, what worked for warm starts of tiny models). */
  learningRate?: number;
  /** Linear warm-up steps (default 0). */
  warmupSteps?: number;
  /** Clip the global gradient norm (default 1; 0 disables). */
  maxGradNorm?: number;
  /** Shuffling seed (default 0). */
  seed?: number;
  /**
   * After warm-up: "constant" (default) keeps `learningRate`; "linear" decays it linearly towards 0
   * (`learningRate / (steps - warmupSteps)` at the last step): a cool-down, as in warmup-stable-decay
   * schedules. "linear" sets the rate also of an optimizer passed in.
   */
  schedule?: "constant" | "linear";
  /**
   * Bring your own optimizer (e.g. restored from a checkpoint, or to continue a run); `learningRate`/
   * `warmupSteps` are then unused unless `schedule` is "linear".
   */
  optimizer?: tf.Optimizer;
  /** Show a cli-progress bar (default: when the progress stream is a TTY). */
  progress?: boolean;
  /** Where the bar is drawn (default `process.stderr`); on a non-TTY it prints one line per update. */
  progressStream?: NodeJS.WritableStream & { isTTY?: boolean };
  /** Called after every step. */
  onStep?: (info: {
    step: number;
    loss: number;
    /** Assistant (trained) tokens in the batch. */
    tokens: number;
    /** All tokens of the batch's sequences (no padding): the forward/backward work of the step. */
    sequenceTokens: number;
  }) => void;
  /**
   * Split each batch into as many micro-batches as runs of this many rows would give, whose gradients are
   * summed before the step (same loss: each is divided by the whole batch's target count). Rows are
   * grouped by length so the micro-batches pad to about the same size (`lengthBalancedMicroBatches`; one
   * may hold more, shorter rows). Default: the whole batch at once, or one micro-batch per worker with
   * `workers` — made smaller, with a log line, when a Hugging Face model on the WASM backend would not fit
   * in its 4 GiB heap. A value set here that cannot fit fails before the first step (`TrainingMemoryError`).
   */
  microBatchSize?: number;
  /**
   * Compute the micro-batch gradients on these worker threads (`startPolicyWorkers(policy)`, started with
   * this `model`); the optimizer step stays in this thread and the new weights are broadcast after it.
   * Same result as `microBatchSize` in one thread.
   */
  workers?: PolicyWorkers;
  /** Where the one "skipped N examples" line goes (default `console.warn`); pass `() => {}` to silence. */
  log?: (line: string) => void;
}

export interface SftResult {
  /** Mean masked cross-entropy (nats per assistant token) of every step. */
  losses: number[];
  steps: number;
  /** Assistant (trained) tokens seen. */
  trainedTokens: number;
  /** All tokens processed per second (after cropping each batch to its longest sequence). */
  tokensPerSecond: number;
  /** How many examples were dropped (see `skippedExamples`). */
  skipped: number;
  /** Each dropped example (index in the input) and why: unconvertible message, no assistant token in context. */
  skippedExamples: Array<{ index: number; reason: string }>;
  optimizer: tf.Optimizer;
}

interface Encoded {
  ids: number[];
  mask: number[];
}

/** Read a JSONL file of `{messages, tools}` lines (validated per example by `sft()`, not here). */
export async function readSftJsonl(path: string): Promise<RawSftExample[]> {
  const text = await readFile(path, "utf8");
  const out: RawSftExample[] = [];
  text.split("\n").forEach((line, i) => {
    if (line.trim() === "") return;
    try {
      out.push(JSON.parse(line) as RawSftExample);
    } catch (error) {
      throw new Error(`${path}:${i + 1}: not valid JSON (${(error as Error).message})`);
    }
  });
  return out;
}

/** Masked next-token cross-entropy: mean over positions whose target token is an assistant token. */
export function maskedNll(model: CausalLM, ids: number[][], mask: number[][]): tf.Scalar {
  const lp = model.tokenLogProbs(ids);
  const w = tf.tensor2d(
    mask.map((r) => r.slice(1)),
    [ids.length, (ids[0]?.length ?? 1) - 1],
  );
  return tf.div(tf.neg(tf.sum(tf.mul(lp, w))), tf.maximum(tf.sum(w), 1)) as tf.Scalar;
}

function clipByGlobalNorm(grads: Record<string, tf.Tensor>, maxNorm: number): Record<string, tf.Tensor> {
  if (maxNorm <= 0) return grads;
  return tf.tidy(() => {
    const sq = Object.values(grads).map((g) => tf.sum(tf.square(g)));
    const norm = Math.sqrt(tf.addN(sq).dataSync()[0] as number);
    if (norm <= maxNorm) return Object.fromEntries(Object.entries(grads).map(([k, g]) => [k, tf.clone(g)]));
    const scale = maxNorm / (norm + 1e-6);
    return Object.fromEntries(Object.entries(grads).map(([k, g]) => [k, tf.mul(g, scale)]));
  });
}

/**
 * One step over `batch` split into length-balanced micro-batches (`micro` rows of the longest at most;
 * computed here, or on `workers`), their gradients summed in order; returns the batch loss (the sum of the micro-batches' shares).
 */
async function microBatchStep(
  model: CausalLM,
  batch: readonly Encoded[],
  micro: number,
  optimizer: tf.Optimizer,
  maxGradNorm: number,
  workers: PolicyWorkers | undefined,
): Promise<number> {
  const parts = lengthBalancedMicroBatches(
    batch.map((b) => b.ids.length),
    micro,
  ).map((group) => padRows(group.map((i) => batch[i]!)));
  const denom = targetCount(batch);
  const results = workers
    ? await sftGradsOnWorkers(workers, parts, denom)
    : (function* () {
        for (const p of parts) yield sftMicroGrads(model, p, denom);
      })();
  let acc: tf.Tensor[] | null = null;
  let loss = 0;
  for (const r of results) {
    acc = addGrads(acc, r.grads);
    loss += r.loss;
  }
  const vars = model.trainableVariables;
  const summed = Object.fromEntries(vars.map((v, k) => [v.name, (acc as tf.Tensor[])[k] as tf.Tensor]));
  const clipped = clipByGlobalNorm(summed, maxGradNorm);
  optimizer.applyGradients(clipped);
  tf.dispose([...Object.values(summed), ...Object.values(clipped)]);
  if (workers) await workers.syncWeights();
  return loss;
}

/**
 * Supervised fine-tuning on chat transcripts: only assistant tokens (text, tool calls, closing `<eos>`)
 * contribute to the loss; system, user, tool and template tokens are context. Each batch is cropped to
 * its longest sequence; transcripts longer than the context are truncated. Adapter-style transcripts
 * (null ids/content, content parts, string roles) are converted; examples that cannot be used are skipped
 * and reported (`skippedExamples`, one log line) rather than failing the run.
 */
export async function sft(
  model: CausalLM,
  data: readonly (SftExample | RawSftExample)[] | string,
  options: SftOptions,
): Promise<SftResult> {
  const workers = options.workers;
  if (workers && workers.model !== model) {
    throw new InvalidArgumentError("workers", "the worker pool must be started with the model being trained");
  }
  parseOrThrow(z.number().int().min(1).optional(), options.microBatchSize, "microBatchSize");
  const examples = typeof data === "string" ? await readSftJsonl(data) : data;
  const ctx = model.config.contextLength;
  const encoded: Encoded[] = [];
  const skippedExamples: SftResult["skippedExamples"] = [];
  examples.forEach((ex, index) => {
    const r = encodeExample(options.template, ex, index);
    if (!r.ok) {
      skippedExamples.push({ index, reason: r.reason });
      return;
    }
    const ids = r.encoded.ids.slice(0, ctx);
    const mask = r.encoded.assistantMask.slice(0, ctx);
    if (mask.slice(1).some((m) => m === 1)) encoded.push({ ids, mask });
    else skippedExamples.push({ index, reason: `no assistant token within the context length (${ctx})` });
  });
  if (encoded.length === 0) {
    const why = skippedExamples.length > 0 ? `: ${summarizeSkips(skippedExamples)}` : "";
    throw new Error(`sft: none of the ${examples.length} examples is usable${why}`);
  }
  if (skippedExamples.length > 0) {
    const log = options.log ?? ((line: string) => console.warn(line));
    log(
      `[agl] sft: skipped ${skippedExamples.length} of ${examples.length} examples (${summarizeSkips(skippedExamples)})`,
    );
  }
  const batchSize = Math.max(1, Math.min(options.batchSize ?? 16, encoded.length));
  // Before the first step: does a micro-batch fit in the backend's memory (the WASM heap's 4 GiB)?
  // One that was not set is shrunk to fit (gradient accumulation gives the same step); one that was
  // set, or a sequence too long for even one row, fails here with the option to change.
  const perReplica = options.microBatchSize ?? (workers ? Math.ceil(batchSize / workers.size) : batchSize);
  const fit = fitMicroBatch(model, {
    rows: perReplica,
    seqLength: Math.max(...encoded.map((e) => e.ids.length)),
    option: "microBatchSize",
    fixed: options.microBatchSize !== undefined,
  });
  const autoMicro = fit.rows < perReplica ? fit.rows : undefined;
  if (autoMicro !== undefined) {
    (options.log ?? ((line: string) => console.warn(line)))(
      `[agl] sft: micro-batches of ${autoMicro} rows (a batch of ${perReplica} would not fit in memory); set microBatchSize to choose`,
    );
  }
  const perEpoch = Math.ceil(encoded.length / batchSize);
  const totalSteps = options.steps ?? perEpoch * (options.epochs ?? 1);
  const lr = options.learningRate ?? 2e-3;
  const warmup = options.warmupSteps ?? 0;
  const optimizer = options.optimizer ?? tf.train.adam(warmup > 0 ? lr / warmup : lr);
  const rng = createRng(options.seed ?? 0);
  // The replicas start from the weights the model has now.
  if (workers) await workers.syncWeights();
  const pad = 0;

  let order: number[] = [];
  const nextBatch = (): Encoded[] => {
    const batch: Encoded[] = [];
    while (batch.length < batchSize) {
      if (order.length === 0) {
        order = encoded.map((_, i) => i);
        for (let i = order.length - 1; i > 0; i--) {
          const j = Math.floor(rng() * (i + 1));
          [order[i], order[j]] = [order[j] as number, order[i] as number];
        }
      }
      batch.push(encoded[order.pop() as number] as Encoded);
      if (order.length === 0 && batch.length > 0) break;
    }
    return batch;
  };

  const stream = options.progressStream ?? process.stderr;
  const tty = stream.isTTY === true;
  const showBar = options.progress ?? tty;
  const bar = showBar
    ? new cliProgress.SingleBar(
        {
          format: "sft [{bar}] {value}/{total} steps | loss {loss} | {tps} tok/s | eta {eta_formatted}",
          stream,
          // cli-progress draws nothing on a non-TTY unless told to; asked-for progress in CI logs should show.
          noTTYOutput: !tty,
        },
        cliProgress.Presets.shades_classic,
      )
    : undefined;
  bar?.start(totalSteps, 0, { loss: "-", tps: "-" });

  const losses: number[] = [];
  let trainedTokens = 0;
  let processed = 0;
  const t0 = performance.now();
  try {
    for (let step = 0; step < totalSteps; step++) {
      if (options.schedule === "linear") {
        const rise = warmup > 0 ? Math.min(1, (step + 1) / warmup) : 1;
        const fall = (totalSteps - step) / Math.max(1, totalSteps - warmup);
        (optimizer as unknown as { learningRate: number }).learningRate = lr * Math.min(rise, fall);
      } else if (options.optimizer === undefined && warmup > 0) {
        (optimizer as unknown as { learningRate: number }).learningRate =
          lr * Math.min(1, (step + 1) / warmup);
      }
      const batch = nextBatch();
      const T = Math.max(...batch.map((b) => b.ids.length));
      const ids = batch.map((b) => [...b.ids, ...new Array<number>(T - b.ids.length).fill(pad)]);
      const mask = batch.map((b) => [...b.mask, ...new Array<number>(T - b.mask.length).fill(0)]);
      const micro =
        options.microBatchSize ?? autoMicro ?? (workers ? Math.ceil(batch.length / workers.size) : undefined);
      let loss: number;
      if (micro === undefined) {
        const { value, grads } = tf.variableGrads(
          () => maskedNll(model, ids, mask),
          model.trainableVariables,
        );
        const clipped = clipByGlobalNorm(grads, options.maxGradNorm ?? 1);
        optimizer.applyGradients(clipped);
        loss = (await value.data())[0] as number;
        tf.dispose([value, grads, clipped]);
      } else {
        loss = await microBatchStep(model, batch, micro, optimizer, options.maxGradNorm ?? 1, workers);
      }
      losses.push(loss);
      const tokens = mask.reduce((a, r) => a + r.slice(1).reduce((x, y) => x + y, 0), 0);
      trainedTokens += tokens;
      processed += batch.length * T;
      const tps = processed / ((performance.now() - t0) / 1000);
      bar?.update(step + 1, { loss: loss.toFixed(4), tps: tps.toFixed(0) });
      options.onStep?.({ step, loss, tokens, sequenceTokens: batch.reduce((a, b) => a + b.ids.length, 0) });
      // Keep servers and timers responsive during long runs.
      await new Promise<void>((r) => setImmediate(r));
    }
  } finally {
    bar?.stop();
  }
  return {
    losses,
    steps: losses.length,
    trainedTokens,
    tokensPerSecond: processed / ((performance.now() - t0) / 1000),
    skipped: skippedExamples.length,
    skippedExamples,
    optimizer,
  };
}
