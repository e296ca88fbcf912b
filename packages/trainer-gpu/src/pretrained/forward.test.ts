import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { type ModelType, SUPPORTED_MODEL_TYPES } from "./hf-config.js";
import { loadPretrained } from "./load.js";
import { writeRandomCheckpoint } from "./random-checkpoint.js";
import { ReferenceLM } from "./test-support/reference-lm.js";

let root: string;
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-hf-fwd-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const IDS = [1, 17, 200, 5, 99, 3, 250, 42, 7, 128, 64, 2];

/** max |a - b| relative to max |b|. */
function relError(a: ArrayLike<number>[], b: ArrayLike<number>[]): number {
  let diff = 0;
  let scale = 0;
  a.forEach((row, t) => {
    for (let i = 0; i < row.length; i++) {
      diff = Math.max(diff, Math.abs((row[i] as number) - ((b[t] as ArrayLike<number>)[i] as number)));
      scale = Math.max(scale, Math.abs((b[t] as ArrayLike<number>)[i] as number));
    }
  });
  return diff / scale;
}

async function modelLogits(dir: string, ids: number[]): Promise<number[][]> {
  const { model } = await loadPretrained(dir);
  try {
    return tf.tidy(() => (model.logits([ids]).arraySync() as number[][][])[0] as number[][]);
  } finally {
    model.dispose();
  }
}

describe("forward logits vs an independent float64 reference", () => {
  for (const family of SUPPORTED_MODEL_TYPES as readonly ModelType[]) {
    for (const style of ["v4", "v5"] as const) {
      it(`${family} (transformers ${style} config)`, async () => {
        const dir = join(root, `${family}-${style}`);
        await writeRandomCheckpoint(dir, { family, seed: 3, configStyle: style, initStd: 0.15 });
        const ours = await modelLogits(dir, IDS);
        const ref = (await ReferenceLM.load(dir)).forward(IDS);
        expect(ours).toHaveLength(IDS.length);
        const maxLogit = Math.max(...ref.flatMap((r) => Array.from(r, Math.abs)));
        expect(maxLogit).toBeGreaterThan(0.5); // the check below is not vacuous
        expect(relError(ours, ref)).toBeLessThan(2e-5);
      });
    }
  }

  it("a sharded checkpoint loads the same logits as a single file; bf16 matches its reference", async () => {
    const single = join(root, "single");
    const sharded = join(root, "sharded");
    await writeRandomCheckpoint(single, { family: "qwen2", seed: 9, initStd: 0.15 });
    await writeRandomCheckpoint(sharded, { family: "qwen2", seed: 9, initStd: 0.15, maxShardBytes: 40_000 });
    const files = (await readdir(sharded)).filter((f) => f.endsWith(".safetensors"));
    expect(files.length).toBeGreaterThan(2);
    expect(files).toContain(`model-00001-of-${String(files.length).padStart(5, "0")}.safetensors`);
    expect(await modelLogits(sharded, IDS)).toEqual(await modelLogits(single, IDS));

    const bf16 = join(root, "bf16");
    await writeRandomCheckpoint(bf16, { family: "llama", seed: 4, dtype: "bfloat16", initStd: 0.15 });
    const ref = (await ReferenceLM.load(bf16)).forward(IDS);
    expect(relError(await modelLogits(bf16, IDS), ref)).toBeLessThan(2e-5);
  });

  it("partial rotary dimensions and linear rope scaling follow the reference", async () => {
    const dir = join(root, "partial");
    await writeRandomCheckpoint(dir, {
      family: "llama",
      seed: 5,
      initStd: 0.15,
      extraConfig: {
        rope_scaling: { rope_type: "linear", factor: 2 },
        partial_rotary_factor: 0.5,
        head_dim: 16,
      },
    });
    const ref = (await ReferenceLM.load(dir)).forward(IDS);
    expect(relError(await modelLogits(dir, IDS), ref)).toBeLessThan(2e-5);
  });
});
