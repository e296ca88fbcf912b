import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { exportPretrained } from "./export.js";
import { loadPretrained } from "./load.js";
import { writeRandomCheckpoint } from "./random-checkpoint.js";
import { readSafetensorsHeader } from "./safetensors.js";

let root: string;
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-hf-export-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const IDS = [[1, 9, 33, 70, 2, 5]];
const logitsOf = (m: { logits(ids: number[][]): tf.Tensor3D }) =>
  tf.tidy(() => Array.from(m.logits(IDS).dataSync()));

describe("exportPretrained", () => {
  for (const family of ["qwen2", "qwen3", "llama", "mistral"] as const) {
    it(`${family}: save -> load round trip gives identical logits and keeps config.json's own keys`, async () => {
      const src = join(root, `${family}-src`);
      await writeRandomCheckpoint(src, { family, seed: 6, configStyle: family === "qwen3" ? "v5" : "v4" });
      await writeFile(join(src, "tokenizer.json"), '{"version":"1.0"}');
      await writeFile(join(src, "tokenizer_config.json"), '{"chat_template":"{{ messages }}"}');
      const loaded = await loadPretrained(src);
      const out = join(root, `${family}-out`);
      await exportPretrained(loaded.model, out);
      const again = await loadPretrained(out);
      expect(logitsOf(again.model)).toEqual(logitsOf(loaded.model));
      const files = await readdir(out);
      expect(files).toEqual(
        expect.arrayContaining([
          "config.json",
          "generation_config.json",
          "model.safetensors",
          "tokenizer.json",
          "tokenizer_config.json",
        ]),
      );
      const srcCfg = JSON.parse(await readFile(join(src, "config.json"), "utf8"));
      const outCfg = JSON.parse(await readFile(join(out, "config.json"), "utf8"));
      for (const key of [
        "rope_theta",
        "rope_scaling",
        "rope_parameters",
        "head_dim",
        "initializer_range",
        "sliding_window",
      ]) {
        expect(outCfg[key]).toEqual(srcCfg[key]);
      }
      expect(outCfg.architectures).toEqual(srcCfg.architectures);
      expect(outCfg.tie_word_embeddings).toBe(srcCfg.tie_word_embeddings);
      expect(JSON.parse(await readFile(join(out, "generation_config.json"), "utf8"))).toMatchObject({
        eos_token_id: 2,
      });
      const header = await readSafetensorsHeader(join(out, "model.safetensors"));
      expect(header.entries.has("lm_head.weight")).toBe(!srcCfg.tie_word_embeddings);
      expect(header.entries.get("model.layers.0.self_attn.q_proj.weight")?.dtype).toBe("F32");
      loaded.model.dispose();
      again.model.dispose();
    });
  }

  it("writes sharded bf16 with an index that lists every tensor, and the result loads", async () => {
    const src = join(root, "shard-src");
    await writeRandomCheckpoint(src, { family: "llama", seed: 7 });
    const loaded = await loadPretrained(src);
    const out = join(root, "shard-out");
    await exportPretrained(loaded.model, out, { dtype: "bfloat16", maxShardBytes: 30_000 });
    const index = JSON.parse(await readFile(join(out, "model.safetensors.index.json"), "utf8"));
    expect(Object.keys(index.weight_map).sort()).toEqual([...loaded.model.weightNames].sort());
    const cfg = JSON.parse(await readFile(join(out, "config.json"), "utf8"));
    expect(cfg.torch_dtype).toBe("bfloat16");
    const again = await loadPretrained(out);
    const a = logitsOf(again.model);
    const b = logitsOf(loaded.model);
    expect(Math.max(...a.map((x, i) => Math.abs(x - (b[i] as number))))).toBeLessThan(0.05);
    loaded.model.dispose();
    again.model.dispose();
  });
});
