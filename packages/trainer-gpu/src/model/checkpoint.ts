import { createHash } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { z } from "zod";
import { ChatTemplate, type ToolStyle } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { ModelConfigSchema } from "./config.js";
import { PolicyModel } from "./policy-model.js";

/**
 * Checkpoint directory layout (format version 1):
 *   policy.json    - format tag + version, model config, tokenizer, chat template options, the weight and
 *                    optimizer manifests (name, shape, byte offset) with SHA-256 of each binary, metadata
 *   weights.bin    - float32 little-endian weights, concatenated in manifest order
 *   optimizer.bin  - optimizer slots (e.g. Adam iteration, m, v), when an optimizer was given
 * Files are written to temporary names and renamed, so a crash never leaves a half-written checkpoint
 * that looks valid; any mismatch on load is a CheckpointError naming the file and the problem.
 */

export const CHECKPOINT_FORMAT = "agl-policy";
export const CHECKPOINT_FORMAT_VERSION = 1;

const CHECKPOINT_ERROR = Symbol.for("agl.CheckpointError");

export class CheckpointError extends Error {
  readonly [CHECKPOINT_ERROR] = true;

  constructor(
    readonly dir: string,
    message: string,
  ) {
    super(`Invalid policy checkpoint at ${dir}: ${message}`);
    this.name = "CheckpointError";
  }

  /** True for a CheckpointError from any copy of this package. */
  static isInstance(error: unknown): error is CheckpointError {
    return (
      typeof error === "object" &&
      error !== null &&
      (error as Record<symbol, unknown>)[CHECKPOINT_ERROR] === true
    );
  }
}

const EntrySchema = z.object({
  name: z.string(),
  shape: z.array(z.number().int().min(0)),
  offset: z.number().int().min(0),
});
type Entry = z.infer<typeof EntrySchema>;

const ManifestSchema = z.object({
  format: z.literal(CHECKPOINT_FORMAT),
  formatVersion: z.number().int(),
  model: ModelConfigSchema,
  // `pieces` (multi-character tokens) must survive the round trip: without them the vocabulary shrinks.
  tokenizer: z.object({
    kind: z.literal("char"),
    chars: z.string(),
    pieces: z.array(z.string()).optional(),
  }),
  chatTemplate: z.object({ toolStyle: z.enum(["signature", "json"]) }),
  weights: z.object({ file: z.string(), sha256: z.string(), entries: z.array(EntrySchema) }),
  optimizer: z.object({ file: z.string(), sha256: z.string(), entries: z.array(EntrySchema) }).nullable(),
  metadata: z.record(z.string(), z.unknown()),
});
type Manifest = z.infer<typeof ManifestSchema>;

export interface SaveCheckpointOptions {
  tokenizer: Tokenizer;
  template?: ChatTemplate;
  /** Saved when given (after at least one step, so its slots exist). */
  optimizer?: tf.Optimizer;
  /** Free-form JSON (e.g. the training step, RNG state). */
  metadata?: Record<string, unknown>;
}

export interface LoadedCheckpoint {
  model: PolicyModel;
  tokenizer: Tokenizer;
  template: ChatTemplate;
  metadata: Record<string, unknown>;
  /** Whether optimizer state is stored. */
  hasOptimizerState: boolean;
  /** Load the saved optimizer slots into `optimizer` (same class as saved); false when none were saved. */
  restoreOptimizer(optimizer: tf.Optimizer): Promise<boolean>;
}

const MODEL_PLACEHOLDER = "$model";

function pack(tensors: Array<{ name: string; tensor: tf.Tensor }>): { entries: Entry[]; bytes: Buffer } {
  const entries: Entry[] = [];
  const parts: Buffer[] = [];
  let offset = 0;
  for (const { name, tensor } of tensors) {
    const data = tensor.dataSync() as Float32Array;
    const f32 = data instanceof Float32Array ? data : Float32Array.from(data);
    entries.push({ name, shape: tensor.shape, offset });
    parts.push(Buffer.from(f32.buffer, f32.byteOffset, f32.byteLength));
    offset += f32.byteLength;
  }
  return { entries, bytes: Buffer.concat(parts) };
}

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

async function writeAtomic(path: string, data: string | Buffer): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, data);
  await rename(tmp, path);
}

export async function saveCheckpoint(
  dir: string,
  model: PolicyModel,
  options: SaveCheckpointOptions,
): Promise<void> {
  await mkdir(dir, { recursive: true });
  const weights = pack(model.weightNames.map((name) => ({ name, tensor: model.variable(name) })));
  let optimizer: Manifest["optimizer"] = null;
  let optBytes: Buffer | undefined;
  if (options.optimizer) {
    const named = await options.optimizer.getWeights();
    const renamed = named.map((n) => ({
      name: n.name.split(model.scope).join(MODEL_PLACEHOLDER),
      tensor: n.tensor,
    }));
    const packed = pack(renamed);
    optBytes = packed.bytes;
    optimizer = { file: "optimizer.bin", sha256: sha256(packed.bytes), entries: packed.entries };
  }
  const manifest: Manifest = {
    format: CHECKPOINT_FORMAT,
    formatVersion: CHECKPOINT_FORMAT_VERSION,
    model: model.config,
    tokenizer: options.tokenizer.toConfig(),
    chatTemplate: { toolStyle: options.template?.toolStyle ?? "signature" },
    weights: { file: "weights.bin", sha256: sha256(weights.bytes), entries: weights.entries },
    optimizer,
    metadata: options.metadata ?? {},
  };
  await writeAtomic(join(dir, "weights.bin"), weights.bytes);
  if (optBytes) await writeAtomic(join(dir, "optimizer.bin"), optBytes);
  // The manifest goes last: it is what makes the directory a checkpoint.
  await writeAtomic(join(dir, "policy.json"), `${JSON.stringify(manifest, null, 2)}\n`);
}

async function readBinary(dir: string, file: string, sha: string): Promise<Buffer> {
  let bytes: Buffer;
  try {
    bytes = await readFile(join(dir, file));
  } catch (error) {
    throw new CheckpointError(dir, `cannot read ${file} (${(error as Error).message})`);
  }
  if (sha256(bytes) !== sha) throw new CheckpointError(dir, `${file} is corrupted (SHA-256 mismatch)`);
  return bytes;
}

function unpack(
  dir: string,
  file: string,
  bytes: Buffer,
  entries: Entry[],
): Array<{ name: string; tensor: tf.Tensor }> {
  const aligned = new Uint8Array(bytes).buffer;
  return entries.map((e) => {
    const size = e.shape.reduce((a, b) => a * b, 1);
    if (e.offset + size * 4 > aligned.byteLength)
      throw new CheckpointError(dir, `${file} is truncated at "${e.name}"`);
    return { name: e.name, tensor: tf.tensor(new Float32Array(aligned, e.offset, size), e.shape, "float32") };
  });
}

export async function loadCheckpoint(dir: string): Promise<LoadedCheckpoint> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(join(dir, "policy.json"), "utf8"));
  } catch (error) {
    throw new CheckpointError(dir, `policy.json is missing or not JSON (${(error as Error).message})`);
  }
  const fmt = raw as { format?: unknown; formatVersion?: unknown };
  if (fmt?.format !== CHECKPOINT_FORMAT)
    throw new CheckpointError(dir, `not an ${CHECKPOINT_FORMAT} checkpoint`);
  if (fmt.formatVersion !== CHECKPOINT_FORMAT_VERSION) {
    throw new CheckpointError(
      dir,
      `format version ${String(fmt.formatVersion)} is not supported (expected ${CHECKPOINT_FORMAT_VERSION})`,
    );
  }
  const parsed = ManifestSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new CheckpointError(
      dir,
      `policy.json field ${issue?.path.join(".") || "(root)"}: ${issue?.message}`,
    );
  }
  const m = parsed.data;
  const tokenizer = Tokenizer.fromConfig(m.tokenizer);
  if (tokenizer.vocabSize !== m.model.vocabSize) {
    throw new CheckpointError(
      dir,
      `tokenizer vocabulary (${tokenizer.vocabSize}) does not match the model (${m.model.vocabSize})`,
    );
  }
  const bytes = await readBinary(dir, m.weights.file, m.weights.sha256);
  const tensors = unpack(dir, m.weights.file, bytes, m.weights.entries);
  let model: PolicyModel;
  try {
    model = PolicyModel.fromWeights(m.model, new Map(tensors.map((t) => [t.name, t.tensor])));
  } catch (error) {
    throw new CheckpointError(dir, (error as Error).message);
  } finally {
    for (const t of tensors) t.tensor.dispose();
  }
  const optimizerManifest = m.optimizer;
  return {
    model,
    tokenizer,
    template: new ChatTemplate(tokenizer, { toolStyle: m.chatTemplate.toolStyle as ToolStyle }),
    metadata: m.metadata,
    hasOptimizerState: optimizerManifest !== null,
    async restoreOptimizer(optimizer) {
      if (!optimizerManifest) return false;
      const optBytes = await readBinary(dir, optimizerManifest.file, optimizerManifest.sha256);
      const named = unpack(dir, optimizerManifest.file, optBytes, optimizerManifest.entries).map((n) => ({
        name: n.name.split(MODEL_PLACEHOLDER).join(model.scope),
        tensor: n.tensor,
      }));
      await optimizer.setWeights(named);
      for (const n of named) n.tensor.dispose();
      return true;
    },
  };
}
