import { parentPort, workerData } from "node:worker_threads";
import * as tf from "@tensorflow/tfjs";
import { selectBackend } from "../backend/select.js";
import { Generator } from "../generate/generator.js";
import type { GenerateRequest } from "../generate/request.js";
import { computeLogprobs, microBatchGrads } from "../ppo/actor.js";
import { sftMicroGrads } from "../sft/micro-batch.js";
import { HfTokenizer } from "../tokenizer/hf-tokenizer.js";
import type { TextTokenizer } from "../tokenizer/text-tokenizer.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import type {
  FromWorker,
  GradsMessage,
  TokenizerSpec,
  ToWorker,
  WireGenerateRequest,
  WorkerInit,
  WorkerTask,
} from "./protocol.js";
import { assignWeights, buildReplica } from "./replica.js";

/**
 * A policy worker thread: its own tfjs instance (wasm runs one thread per instance), a replica of the
 * policy rebuilt from the main thread's config and weights, and the dynamic-batching Generator on it.
 * It computes gradients of micro-batches and generates on request; the main thread owns the optimizer
 * and sends the new weights after every step.
 */

const port = parentPort;
if (!port) throw new Error("policy worker must run in a worker thread");
const init = workerData as WorkerInit;

function post(message: FromWorker, transfer: ArrayBuffer[] = []): void {
  port?.postMessage(message, transfer);
}

function buildTokenizer(spec: TokenizerSpec): TextTokenizer {
  return spec.kind === "char" ? Tokenizer.fromConfig(spec.config) : new HfTokenizer(spec.files);
}

/** Copy tensors out (they may be views into the backend's memory) and dispose them. */
function toArrays(tensors: tf.Tensor[]): Float32Array[] {
  const out = tensors.map((t) => Float32Array.from(t.dataSync() as Float32Array));
  tf.dispose(tensors);
  return out;
}

function gradsMessage(
  grads: tf.Tensor[],
  stats: number[],
): { result: GradsMessage; transfer: ArrayBuffer[] } {
  const arrays = toArrays(grads);
  return { result: { grads: arrays, stats }, transfer: arrays.map((a) => a.buffer as ArrayBuffer) };
}

await selectBackend({ backend: init.backend, log: () => {} });
const model = buildReplica(init.model);
const generator = new Generator(model, buildTokenizer(init.tokenizer), { maxBatchSize: init.maxBatchSize });
const aborts = new Map<number, AbortController[]>();

function generate(id: number, requests: WireGenerateRequest[]): void {
  const controllers = requests.map(() => new AbortController());
  aborts.set(id, controllers);
  const reqs: GenerateRequest[] = requests.map(({ stream, aborted, ...params }, index) => {
    if (aborted) controllers[index]?.abort();
    return {
      ...params,
      signal: controllers[index]?.signal,
      onToken: stream ? (event) => post({ type: "token", id, index, event }) : undefined,
    };
  });
  generator
    .generateMany(reqs)
    .then(
      (result) => post({ type: "result", id, result }),
      (error: unknown) => fail(id, error),
    )
    .finally(() => aborts.delete(id));
}

function fail(id: number, error: unknown): void {
  const e = error instanceof Error ? error : new Error(String(error));
  post({ type: "error", id, message: e.message, stack: e.stack });
}

function run(id: number, task: WorkerTask): void {
  switch (task.op) {
    case "setWeights":
      assignWeights(model, task.weights);
      post({ type: "result", id, result: null });
      return;
    case "sftGrads": {
      const { grads, loss } = sftMicroGrads(model, task.batch, task.batch.denom);
      const { result, transfer } = gradsMessage(grads, [loss]);
      post({ type: "result", id, result }, transfer);
      return;
    }
    case "actorGrads": {
      const { grads, stats } = microBatchGrads(model, task.batch, task.options);
      const { result, transfer } = gradsMessage(grads, stats);
      post({ type: "result", id, result }, transfer);
      return;
    }
    case "generate":
      generate(id, task.requests);
      return;
    case "logprobs": {
      const result = computeLogprobs(model, task.rows, task.microBatchRows, task.padId, task.temperature);
      post({ type: "result", id, result });
      return;
    }
    default:
      throw new Error(`unknown task ${String((task as { op?: unknown }).op)}`);
  }
}

port.on("message", (message: ToWorker) => {
  if (message.type === "abort") {
    aborts.get(message.id)?.[message.index]?.abort();
    return;
  }
  try {
    run(message.id, message.task);
  } catch (error) {
    fail(message.id, error);
  }
});
post({ type: "ready" });
