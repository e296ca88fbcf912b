import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { CausalLM } from "../model/causal-lm.js";
import { BaseModelView } from "../pretrained/base-view.js";
import { restorePolicyFiles, savePolicyFiles } from "../pretrained/policy-files.js";
import type { ChatEncoder, TextTokenizer } from "../tokenizer/text-tokenizer.js";
import type { MetricsRecord } from "./metrics-log.js";
import type { AdamState } from "./optim.js";
import type { ValueHeadState } from "./value-head.js";

/**
 * PPO checkpoints, laid out as VERL does: `<dir>/global_step_<k>/` and
 * `<dir>/latest_checkpointed_iteration.txt`. Each holds the actor in a servable form (the policy
 * checkpoint format; for a loaded Hugging Face model its exported folder, or the PEFT adapter for LoRA), the optimizer moments, the frozen reference policy when
 * KL is used, the GAE critic (value head weights and its own Adam state) when there is one, and the
 * trainer state (step, metrics so far). Everything a resumed run needs to
 * continue exactly where an uninterrupted run would be.
 */

export const LATEST_FILE = "latest_checkpointed_iteration.txt";

export interface TrainerState {
  step: number;
  history: MetricsRecord[];
  /** The config the run was started with (for a mismatch warning on resume). */
  config: unknown;
}

export interface PPOCheckpointParts {
  model: CausalLM;
  tokenizer: TextTokenizer;
  template: ChatEncoder;
  optimizer: AdamState;
  reference: CausalLM | null;
  /** The GAE value head, null for critic-free estimators. */
  critic: ValueHeadState | null;
  state: TrainerState;
  /** Writes more files into the checkpoint folder before it is marked complete (per-policy optimizers). */
  saveExtra?: (dir: string) => Promise<void>;
}

export class PPOCheckpointError extends Error {
  constructor(
    readonly dir: string,
    problem: string,
  ) {
    super(`checkpoint ${dir}: ${problem}`);
    this.name = "PPOCheckpointError";
  }
}

const stepDir = (root: string, step: number) => join(root, `global_step_${step}`);

async function writeAtomic(path: string, data: string | Buffer): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, data);
  await rename(tmp, path);
}

function packOptimizer(state: AdamState): { bytes: Buffer; meta: unknown } {
  const arrays = [...state.m, ...state.v];
  const bytes = Buffer.concat(arrays.map((a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength)));
  return {
    bytes,
    meta: {
      step: state.step,
      sizes: state.m.map((a) => a.length),
      sha256: createHash("sha256").update(bytes).digest("hex"),
    },
  };
}

interface PackedMeta {
  step: number;
  sizes: number[];
  sha256: string;
}

/** Read `<name>.bin` / `<name>.json` as written by `packOptimizer`: `copies` runs of arrays of `sizes`. */
async function readPacked(
  dir: string,
  name: string,
  copies: number,
): Promise<{ meta: PackedMeta; arrays: Float32Array[] }> {
  const meta = JSON.parse(await readFile(join(dir, `${name}.json`), "utf8")) as PackedMeta;
  const bytes = await readFile(join(dir, `${name}.bin`));
  if (createHash("sha256").update(bytes).digest("hex") !== meta.sha256) {
    throw new PPOCheckpointError(dir, `${name}.bin is corrupted (SHA-256 mismatch)`);
  }
  const expected = meta.sizes.reduce((a, b) => a + b, 0) * 4 * copies;
  if (bytes.byteLength !== expected) {
    throw new PPOCheckpointError(dir, `${name}.bin holds ${bytes.byteLength} bytes, expected ${expected}`);
  }
  const buffer = new Uint8Array(bytes).buffer;
  const arrays: Float32Array[] = [];
  let offset = 0;
  for (let c = 0; c < copies; c++) {
    for (const size of meta.sizes) {
      arrays.push(new Float32Array(buffer, offset, size));
      offset += size * 4;
    }
  }
  return { meta, arrays };
}

/** Write one optimizer's state as `<name>.bin` / `<name>.json` (e.g. one per adapter of a multi-policy run). */
export async function writeOptimizerState(dir: string, name: string, state: AdamState): Promise<void> {
  const opt = packOptimizer(state);
  await mkdir(dir, { recursive: true });
  await writeAtomic(join(dir, `${name}.bin`), opt.bytes);
  await writeAtomic(join(dir, `${name}.json`), JSON.stringify(opt.meta));
}

/** Read what `writeOptimizerState` wrote (checked against its SHA-256 and sizes). */
export async function readOptimizerState(dir: string, name: string): Promise<AdamState> {
  const { meta, arrays } = await readPacked(dir, name, 2);
  const n = meta.sizes.length;
  return { step: meta.step, m: arrays.slice(0, n), v: arrays.slice(n) };
}

export async function savePPOCheckpoint(root: string, parts: PPOCheckpointParts): Promise<string> {
  const dir = stepDir(root, parts.state.step);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  await savePolicyFiles(join(dir, "actor"), parts.model, {
    tokenizer: parts.tokenizer,
    template: parts.template,
    metadata: { step: parts.state.step },
  });
  if (parts.reference) {
    await savePolicyFiles(join(dir, "ref"), parts.reference, {
      tokenizer: parts.tokenizer,
      template: parts.template,
    });
  }
  const opt = packOptimizer(parts.optimizer);
  await writeAtomic(join(dir, "actor_optim.bin"), opt.bytes);
  await writeAtomic(join(dir, "actor_optim.json"), JSON.stringify(opt.meta));
  if (parts.critic) {
    // One file: the weights, then Adam's first and second moments, all of the value head's sizes.
    const { weights, optimizer } = parts.critic;
    const packed = packOptimizer({ step: optimizer.step, m: weights, v: [...optimizer.m, ...optimizer.v] });
    const meta = { ...(packed.meta as PackedMeta), sizes: weights.map((w) => w.length) };
    await writeAtomic(join(dir, "critic.bin"), packed.bytes);
    await writeAtomic(join(dir, "critic.json"), JSON.stringify(meta));
  }
  await parts.saveExtra?.(dir);
  // The trainer state goes last: its presence marks a complete checkpoint.
  await writeAtomic(join(dir, "trainer_state.json"), JSON.stringify(parts.state));
  await writeAtomic(join(root, LATEST_FILE), String(parts.state.step));
  return dir;
}

export interface LoadedPPOCheckpoint {
  dir: string;
  state: TrainerState;
  optimizer: AdamState;
  /** The saved value head, null when the run had no critic. */
  critic: ValueHeadState | null;
  /** Copy the saved actor (and reference) weights into the given models. */
  restoreInto(model: CausalLM, reference: CausalLM | null): Promise<void>;
}

/** The latest complete checkpoint under `root`, or null when there is none. */
export async function loadLatestPPOCheckpoint(root: string): Promise<LoadedPPOCheckpoint | null> {
  const latest = join(root, LATEST_FILE);
  if (!existsSync(latest)) return null;
  const step = Number.parseInt((await readFile(latest, "utf8")).trim(), 10);
  if (!Number.isInteger(step)) throw new Error(`${latest} does not hold a step number`);
  const dir = stepDir(root, step);
  const statePath = join(dir, "trainer_state.json");
  if (!existsSync(statePath)) throw new Error(`checkpoint ${dir} is incomplete (no trainer_state.json)`);
  const state = JSON.parse(await readFile(statePath, "utf8")) as TrainerState;
  const { meta, arrays } = await readPacked(dir, "actor_optim", 2);
  const n = meta.sizes.length;
  let critic: ValueHeadState | null = null;
  if (existsSync(join(dir, "critic.json"))) {
    const c = await readPacked(dir, "critic", 3);
    const k = c.meta.sizes.length;
    critic = {
      weights: c.arrays.slice(0, k),
      optimizer: { step: c.meta.step, m: c.arrays.slice(k, 2 * k), v: c.arrays.slice(2 * k) },
    };
  }
  return {
    dir,
    state,
    optimizer: { step: meta.step, m: arrays.slice(0, n), v: arrays.slice(n) },
    critic,
    async restoreInto(model, reference) {
      await restorePolicyFiles(join(dir, "actor"), model);
      if (reference) {
        const refDir = join(dir, "ref");
        const needsFiles = !(reference instanceof BaseModelView);
        if (needsFiles && !existsSync(refDir))
          throw new Error(`checkpoint ${dir} has no reference policy but KL is enabled`);
        if (needsFiles) await restorePolicyFiles(refDir, reference);
      }
    },
  };
}
