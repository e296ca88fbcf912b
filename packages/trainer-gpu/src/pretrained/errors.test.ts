import { cp, mkdtemp, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { PretrainedCheckpointError, type PretrainedErrorCode } from "./errors.js";
import { loadPretrained } from "./load.js";
import { applyLora } from "./lora.js";
import { exportPeftAdapter, loadPeftAdapter } from "./peft.js";
import { writeRandomCheckpoint } from "./random-checkpoint.js";
import { readSafetensors, writeSafetensors } from "./safetensors.js";

let root: string;
let good: string;
let sharded: string;
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-hf-err-"));
  good = join(root, "good");
  sharded = join(root, "sharded");
  await writeRandomCheckpoint(good, { family: "qwen2", seed: 1 });
  await writeRandomCheckpoint(sharded, { family: "qwen2", seed: 1, maxShardBytes: 40_000 });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

let n = 0;
async function copyOf(dir: string): Promise<string> {
  const out = join(root, `case-${n++}`);
  await cp(dir, out, { recursive: true });
  return out;
}

async function expectLoadError(
  dir: string,
  code: PretrainedErrorCode,
  file: string,
  tensor?: string | RegExp,
) {
  const error = await loadPretrained(dir).then(
    () => null,
    (e: unknown) => e,
  );
  expect(PretrainedCheckpointError.isInstance(error)).toBe(true);
  const e = error as PretrainedCheckpointError;
  expect(e.code).toBe(code);
  expect(e.file).toBe(join(dir, file));
  expect(e.message).toContain(file);
  if (tensor !== undefined) {
    if (typeof tensor === "string") expect(e.tensor).toBe(tensor);
    else expect(e.tensor).toMatch(tensor);
    expect(e.message).toContain(e.tensor);
  }
  return e;
}

async function editConfig(dir: string, edit: (c: Record<string, unknown>) => void) {
  const p = join(dir, "config.json");
  const c = JSON.parse(await readFile(p, "utf8"));
  edit(c);
  await writeFile(p, JSON.stringify(c));
}

describe("corrupted or mismatched checkpoints fail with a typed error naming file and tensor", () => {
  it("unknown model_type", async () => {
    const dir = await copyOf(good);
    await editConfig(dir, (c) => {
      c.model_type = "gpt_neox";
    });
    const e = await expectLoadError(dir, "unknown_model_type", "config.json");
    expect(e.message).toContain("gpt_neox");
  });

  it("missing config.json / invalid JSON / invalid field", async () => {
    const dir = await copyOf(good);
    await rm(join(dir, "config.json"));
    await expectLoadError(dir, "missing_file", "config.json");
    await writeFile(join(dir, "config.json"), "{ not json");
    await expectLoadError(dir, "invalid_json", "config.json");
    await writeFile(join(dir, "config.json"), JSON.stringify({ model_type: "llama", hidden_size: "big" }));
    const e = await expectLoadError(dir, "invalid_config", "config.json");
    expect(e.message).toMatch(/vocab_size|hidden_size/);
  });

  it("unsupported rope type", async () => {
    const dir = await copyOf(good);
    await editConfig(dir, (c) => {
      c.rope_scaling = { rope_type: "longrope", factor: 4 };
    });
    const e = await expectLoadError(dir, "unsupported_config", "config.json");
    expect(e.message).toContain("longrope");
  });

  it("wrong shapes: config says a wider MLP than the weights", async () => {
    const dir = await copyOf(good);
    await editConfig(dir, (c) => {
      c.intermediate_size = 96;
    });
    const e = await expectLoadError(
      dir,
      "shape_mismatch",
      "model.safetensors",
      "model.layers.0.mlp.gate_proj.weight",
    );
    expect(e.message).toContain("[64,32]");
  });

  it("missing tensor (single file and shard)", async () => {
    const dir = await copyOf(good);
    const file = join(dir, "model.safetensors");
    const tensors = await readSafetensors(file);
    tensors.delete("model.layers.1.self_attn.k_proj.bias");
    await writeSafetensors(file, tensors);
    await expectLoadError(dir, "missing_tensor", "model.safetensors", "model.layers.1.self_attn.k_proj.bias");

    const sd = await copyOf(sharded);
    const index = JSON.parse(await readFile(join(sd, "model.safetensors.index.json"), "utf8"));
    const shard = index.weight_map["model.norm.weight"] as string;
    const st = await readSafetensors(join(sd, shard));
    st.delete("model.norm.weight");
    await writeSafetensors(join(sd, shard), st);
    await expectLoadError(sd, "missing_tensor", shard, "model.norm.weight");
  });

  it("a missing shard names the shard", async () => {
    const sd = await copyOf(sharded);
    const index = JSON.parse(await readFile(join(sd, "model.safetensors.index.json"), "utf8"));
    const second = [
      ...new Set(Object.values(index.weight_map as Record<string, string>)),
    ].sort()[1] as string;
    expect(second).toMatch(/^model-00002-of-\d{5}\.safetensors$/);
    await rm(join(sd, second));
    await expectLoadError(sd, "missing_file", second);
  });

  it("no weights at all", async () => {
    const dir = await copyOf(good);
    await rm(join(dir, "model.safetensors"));
    await expectLoadError(dir, "missing_file", "model.safetensors");
  });

  it("truncated file names the first tensor whose data is cut off", async () => {
    const dir = await copyOf(good);
    const file = join(dir, "model.safetensors");
    await truncate(file, (await stat(file)).size - 100);
    await expectLoadError(dir, "truncated", "model.safetensors", /model\.norm\.weight|lm_head|layers\.1/);
    await truncate(file, 20);
    await expectLoadError(dir, "truncated", "model.safetensors");
  });

  it("garbage header", async () => {
    const dir = await copyOf(good);
    const buf = Buffer.alloc(64);
    buf.writeBigUInt64LE(40n);
    buf.write("{ this is not json", 8);
    await writeFile(join(dir, "model.safetensors"), buf);
    await expectLoadError(dir, "invalid_header", "model.safetensors");
  });

  it("a file that is not safetensors at all says so, without printing garbage as a length", async () => {
    const dir = await copyOf(good);
    // e.g. an HTML error page or a git-lfs pointer saved as model.safetensors
    await writeFile(
      join(dir, "model.safetensors"),
      "version https://git-lfs.github.com/spec/v1\noid sha256:00\n",
    );
    const e = await expectLoadError(dir, "invalid_header", "model.safetensors");
    expect(e.message).toContain("not a safetensors file");
    expect(e.message).toContain('text "version "');
    expect(e.message).toContain("76 65 72 73 69 6f 6e 20");
    // No number of 16+ digits (a 64-bit garbage length printed through a double).
    expect(e.message).not.toMatch(/\d{16,}/);
    const zero = Buffer.alloc(16);
    await writeFile(join(dir, "model.safetensors"), zero);
    expect((await expectLoadError(dir, "invalid_header", "model.safetensors")).message).toContain(
      "00 00 00 00",
    );
  });

  it("a malformed header entry names the tensor and the field", async () => {
    const dir = await copyOf(good);
    const file = join(dir, "model.safetensors");
    const raw = await readFile(file);
    const len = Number(raw.readBigUInt64LE(0));
    const header = raw.subarray(8, 8 + len).toString("utf8");
    const patched = header.replace(/("model\.norm\.weight":\{"dtype":"F32","shape":)\[(\d+)\]/, '$1["$2"]');
    expect(patched).not.toBe(header);
    const lenBuf = Buffer.alloc(8);
    lenBuf.writeBigUInt64LE(BigInt(patched.length));
    await writeFile(file, Buffer.concat([lenBuf, Buffer.from(patched), raw.subarray(8 + len)]));
    const e = await expectLoadError(dir, "invalid_header", "model.safetensors", "model.norm.weight");
    expect(e.message).toMatch(/field shape\.0: /);
  });

  it("a tensor the config does not explain (llama config over qwen2 weights)", async () => {
    const dir = await copyOf(good);
    await editConfig(dir, (c) => {
      c.model_type = "llama";
    });
    await expectLoadError(dir, "unexpected_tensor", "model.safetensors", /self_attn\.[qkv]_proj\.bias/);
  });

  it("non-float dtype", async () => {
    const dir = await copyOf(good);
    const file = join(dir, "model.safetensors");
    const raw = await readFile(file);
    const len = Number(raw.readBigUInt64LE(0));
    const header = raw.subarray(8, 8 + len).toString("utf8");
    // Same byte width: F32 -> I32 keeps every offset valid.
    const patched = header.replace(/("model\.norm\.weight":\{"dtype":")F32/, "$1I32");
    expect(patched).not.toBe(header);
    await writeFile(file, Buffer.concat([raw.subarray(0, 8), Buffer.from(patched), raw.subarray(8 + len)]));
    await expectLoadError(dir, "unsupported_dtype", "model.safetensors", "model.norm.weight");
  });

  it("PEFT adapter with a wrong rank or an unsupported option", async () => {
    const { model } = await loadPretrained(good);
    applyLora(model, { rank: 2, alpha: 4, targetModules: ["q_proj"] });
    const dir = join(root, "adapter");
    await exportPeftAdapter(model, dir);
    model.dispose();
    const cfgPath = join(dir, "adapter_config.json");
    const cfg = JSON.parse(await readFile(cfgPath, "utf8"));
    await writeFile(cfgPath, JSON.stringify({ ...cfg, r: 3 }));
    const fresh = (await loadPretrained(good)).model;
    const e1 = await loadPeftAdapter(fresh, dir).catch((e: unknown) => e as PretrainedCheckpointError);
    expect(e1).toMatchObject({
      code: "shape_mismatch",
      tensor: "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
    });
    await writeFile(cfgPath, JSON.stringify({ ...cfg, use_dora: true }));
    const e2 = await loadPeftAdapter(fresh, dir).catch((e: unknown) => e as PretrainedCheckpointError);
    expect(e2).toMatchObject({ code: "invalid_adapter", file: cfgPath });
    expect(fresh.lora).toBeNull();
    fresh.dispose();
  });
});
