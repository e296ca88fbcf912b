/**
 * Cross-check against the Python reference stack (transformers + peft), for machines that have it:
 *
 *   pnpm exec tsx test/hf-crosscheck/write-expected.ts <out-dir>
 *   python3 test/hf-crosscheck/compare.py <out-dir>
 *
 * The first writes tiny random checkpoints of every family (both config generations, a sharded and a
 * bf16 one), a LoRA adapter in PEFT format and its merged export, and our logits for fixed token ids to
 * `<out-dir>/expected.json`. The second loads each folder with `AutoModelForCausalLM` (and the adapter
 * with `PeftModel`) and compares its float32 logits with ours.
 */
import { writeFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import {
  applyLora,
  exportPeftAdapter,
  exportPretrained,
  loadPretrained,
  type PretrainedModel,
  type RandomCheckpointOptions,
  selectBackend,
  tf,
  writeRandomCheckpoint,
} from "@agl/trainer-gpu";

const out = process.argv[2];
if (!out) throw new Error("usage: hf-crosscheck.ts <out-dir>");
await selectBackend({ log: () => {} });
await mkdir(out, { recursive: true });
const IDS = Array.from({ length: 48 }, (_, i) => (i * 37 + 11) % 256);
const logits = (m: PretrainedModel) => tf.tidy(() => (m.logits([IDS]).arraySync() as number[][][])[0]);

const cases: Array<[string, RandomCheckpointOptions]> = [];
for (const family of ["qwen2", "qwen3", "llama", "mistral"] as const) {
  for (const configStyle of ["v4", "v5"] as const)
    cases.push([`${family}-${configStyle}`, { family, configStyle, seed: 3, initStd: 0.15 }]);
}
cases.push([
  "qwen2-yarn",
  {
    family: "qwen2",
    seed: 6,
    initStd: 0.15,
    extraConfig: { rope_scaling: { type: "yarn", factor: 4, original_max_position_embeddings: 64 } },
  },
]);
cases.push([
  "llama-yarn-v5",
  {
    family: "llama",
    configStyle: "v5",
    seed: 7,
    initStd: 0.15,
    extraConfig: {
      rope_parameters: {
        rope_type: "yarn",
        rope_theta: 10000,
        factor: 8,
        original_max_position_embeddings: 32,
        beta_fast: 16,
        beta_slow: 2,
      },
    },
  },
]);
cases.push([
  "qwen2-sharded-bf16",
  { family: "qwen2", seed: 4, initStd: 0.15, dtype: "bfloat16", maxShardBytes: 40_000 },
]);
cases.push([
  "llama-head-dim-16",
  { family: "llama", seed: 5, initStd: 0.15, tieWordEmbeddings: false, extraConfig: { head_dim: 16 } },
]);

const expected: Record<string, { dir: string; kind: string; base?: string; logits: number[][] }> = {};
for (const [name, options] of cases) {
  const dir = join(out, name);
  await writeRandomCheckpoint(dir, options);
  const { model } = await loadPretrained(dir);
  expected[name] = { dir, kind: "full", logits: logits(model) };
  model.dispose();
}

// LoRA on qwen2: the PEFT adapter over the base, and the merged export.
const base = join(out, "qwen2-v4");
const { model } = await loadPretrained(base);
applyLora(model, {
  rank: 4,
  alpha: 8,
  targetModules: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
});
let i = 0;
for (const w of model.lora!.weights.values())
  w.b.assign(tf.randomNormal(w.b.shape, 0, 0.2, "float32", 50 + i++));
const adapted = logits(model);
await exportPeftAdapter(model, join(out, "qwen2-lora-adapter"), { baseModelNameOrPath: base });
await exportPretrained(model, join(out, "qwen2-lora-merged"));
expected["qwen2-lora-adapter"] = {
  dir: join(out, "qwen2-lora-adapter"),
  kind: "peft",
  base,
  logits: adapted,
};
expected["qwen2-lora-merged"] = { dir: join(out, "qwen2-lora-merged"), kind: "full", logits: adapted };
model.dispose();
writeFileSync(join(out, "expected.json"), JSON.stringify({ ids: IDS, cases: expected }));
console.log(`wrote ${Object.keys(expected).length} cases to ${out}`);
