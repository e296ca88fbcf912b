import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { readSafetensors } from "../safetensors.js";

/**
 * An independent float64 reference of the Llama / Qwen2 / Qwen3 / Mistral decoder, written plainly from
 * the published architecture (loops over arrays, no tfjs, no code shared with the model): it reads
 * config.json itself and takes the raw tensors (`[out, in]` linear weights) by their Hugging Face names.
 * One sequence, full causal attention. Slow by design; only for tiny checkpoints.
 */

type Mat = Float64Array[]; // rows

interface RefConfig {
  [key: string]: unknown;
}

function matrix(t: { shape: number[]; data: Float32Array }): Mat {
  const [rows, cols] = t.shape as [number, number];
  return Array.from({ length: rows }, (_, r) => Float64Array.from(t.data.subarray(r * cols, (r + 1) * cols)));
}

function linear(x: Float64Array, w: Mat, b?: Float64Array): Float64Array {
  const out = new Float64Array(w.length);
  for (let o = 0; o < w.length; o++) {
    const row = w[o] as Float64Array;
    let s = b ? (b[o] as number) : 0;
    for (let i = 0; i < x.length; i++) s += (row[i] as number) * (x[i] as number);
    out[o] = s;
  }
  return out;
}

function rmsNorm(x: Float64Array, w: Float64Array, eps: number): Float64Array {
  let ms = 0;
  for (const v of x) ms += v * v;
  const inv = 1 / Math.sqrt(ms / x.length + eps);
  return x.map((v, i) => v * inv * (w[i] as number));
}

/** Inverse frequencies straight from the formulas (float64 throughout). */
function invFreq(cfg: RefConfig, headDim: number): number[] {
  const params = (cfg.rope_parameters ?? cfg.rope_scaling ?? {}) as Record<string, number | string>;
  const base = Number(params.rope_theta ?? cfg.rope_theta ?? 10000);
  const type = String(params.rope_type ?? params.type ?? "default");
  const factorPartial = Number(params.partial_rotary_factor ?? cfg.partial_rotary_factor ?? 1);
  const dim = Math.floor(headDim * factorPartial);
  const inv: number[] = [];
  for (let i = 0; i < dim; i += 2) inv.push(1 / base ** (i / dim));
  if (type === "linear") return inv.map((f) => f / Number(params.factor));
  if (type !== "llama3") return inv;
  const factor = Number(params.factor);
  const low = Number(params.low_freq_factor);
  const high = Number(params.high_freq_factor);
  const old = Number(params.original_max_position_embeddings);
  return inv.map((f) => {
    const wavelen = (2 * Math.PI) / f;
    if (wavelen < old / high) return f;
    if (wavelen > old / low) return f / factor;
    const smooth = (old / wavelen - low) / (high - low);
    return (1 - smooth) * (f / factor) + smooth * f;
  });
}

export class ReferenceLM {
  private constructor(
    private readonly cfg: RefConfig,
    private readonly t: Map<string, { shape: number[]; data: Float32Array }>,
  ) {}

  /** Read config.json and every safetensors file of `dir` (single or sharded). */
  static async load(dir: string): Promise<ReferenceLM> {
    const cfg = JSON.parse(await readFile(join(dir, "config.json"), "utf8")) as RefConfig;
    const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
    let files = ["model.safetensors"];
    try {
      const index = JSON.parse(await readFile(join(dir, "model.safetensors.index.json"), "utf8"));
      files = [...new Set(Object.values(index.weight_map as Record<string, string>))];
    } catch {
      // single file
    }
    for (const f of files) for (const [k, v] of await readSafetensors(join(dir, f))) tensors.set(k, v);
    return new ReferenceLM(cfg, tensors);
  }

  /** Override tensors (e.g. to add LoRA deltas computed independently). */
  withTensors(extra: Map<string, { shape: number[]; data: Float32Array }>): ReferenceLM {
    return new ReferenceLM(this.cfg, new Map([...this.t, ...extra]));
  }

  private vec(name: string): Float64Array | undefined {
    const x = this.t.get(name);
    return x ? Float64Array.from(x.data) : undefined;
  }

  private mat(name: string): Mat {
    const x = this.t.get(name);
    if (!x) throw new Error(`reference: missing ${name}`);
    return matrix(x);
  }

  /** Logits `[T][V]` for one sequence. */
  forward(ids: readonly number[]): Float64Array[] {
    const c = this.cfg;
    const type = String(c.model_type);
    const d = Number(c.hidden_size);
    const H = Number(c.num_attention_heads);
    const Hkv = Number(c.num_key_value_heads ?? H);
    const dh = Number(c.head_dim ?? d / H);
    const eps = Number(c.rms_norm_eps);
    const inv = invFreq(c, dh);
    const rot = inv.length * 2;
    const emb = this.mat("model.embed_tokens.weight");
    const T = ids.length;
    let hs: Float64Array[] = ids.map((id) => Float64Array.from(emb[id] as Float64Array));
    const rope = (x: Float64Array, pos: number) => {
      const out = Float64Array.from(x);
      for (let j = 0; j < rot / 2; j++) {
        const a = pos * (inv[j] as number);
        const x1 = x[j] as number;
        const x2 = x[j + rot / 2] as number;
        out[j] = x1 * Math.cos(a) - x2 * Math.sin(a);
        out[j + rot / 2] = x2 * Math.cos(a) + x1 * Math.sin(a);
      }
      return out;
    };
    const L = Number(c.num_hidden_layers);
    for (let l = 0; l < L; l++) {
      const p = `model.layers.${l}`;
      const a = `${p}.self_attn`;
      const qW = this.mat(`${a}.q_proj.weight`);
      const kW = this.mat(`${a}.k_proj.weight`);
      const vW = this.mat(`${a}.v_proj.weight`);
      const oW = this.mat(`${a}.o_proj.weight`);
      const qs: Float64Array[][] = [];
      const ks: Float64Array[][] = [];
      const vs: Float64Array[][] = [];
      hs.forEach((h, t) => {
        const x = rmsNorm(h, this.vec(`${p}.input_layernorm.weight`)!, eps);
        const q = linear(x, qW, this.vec(`${a}.q_proj.bias`));
        const k = linear(x, kW, this.vec(`${a}.k_proj.bias`));
        const v = linear(x, vW, this.vec(`${a}.v_proj.bias`));
        const split = (y: Float64Array, n: number) =>
          Array.from({ length: n }, (_, i) => y.slice(i * dh, (i + 1) * dh));
        let qh: Float64Array[] = split(q, H);
        let kh: Float64Array[] = split(k, Hkv);
        if (type === "qwen3") {
          qh = qh.map((x) => rmsNorm(x, this.vec(`${a}.q_norm.weight`)!, eps));
          kh = kh.map((x) => rmsNorm(x, this.vec(`${a}.k_norm.weight`)!, eps));
        }
        qs.push(qh.map((x) => rope(x, t)));
        ks.push(kh.map((x) => rope(x, t)));
        vs.push(split(v, Hkv));
      });
      const next: Float64Array[] = [];
      for (let t = 0; t < T; t++) {
        const merged = new Float64Array(H * dh);
        for (let h = 0; h < H; h++) {
          const kvh = Math.floor(h / (H / Hkv));
          const q = qs[t]![h]!;
          const scores: number[] = [];
          for (let s = 0; s <= t; s++) {
            let dot = 0;
            const k = ks[s]![kvh]!;
            for (let i = 0; i < dh; i++) dot += (q[i] as number) * (k[i] as number);
            scores.push(dot / Math.sqrt(dh));
          }
          const m = Math.max(...scores);
          const e = scores.map((x) => Math.exp(x - m));
          const z = e.reduce((x, y) => x + y, 0);
          for (let s = 0; s <= t; s++) {
            const v = vs[s]![kvh]!;
            for (let i = 0; i < dh; i++)
              merged[h * dh + i] = (merged[h * dh + i] as number) + ((e[s] as number) / z) * (v[i] as number);
          }
        }
        const attnOut = linear(merged, oW, this.vec(`${a}.o_proj.bias`));
        const h1 = hs[t]!.map((x, i) => x + (attnOut[i] as number));
        const x2 = rmsNorm(h1, this.vec(`${p}.post_attention_layernorm.weight`)!, eps);
        const m = `${p}.mlp`;
        const gate = linear(x2, this.mat(`${m}.gate_proj.weight`), this.vec(`${m}.gate_proj.bias`));
        const up = linear(x2, this.mat(`${m}.up_proj.weight`), this.vec(`${m}.up_proj.bias`));
        const act = gate.map((g, i) => (g / (1 + Math.exp(-g))) * (up[i] as number));
        const down = linear(act, this.mat(`${m}.down_proj.weight`), this.vec(`${m}.down_proj.bias`));
        next.push(h1.map((x, i) => x + (down[i] as number)));
      }
      hs = next;
    }
    const head = c.tie_word_embeddings ? emb : this.mat("lm_head.weight");
    return hs.map((h) => linear(rmsNorm(h, this.vec("model.norm.weight")!, eps), head));
  }
}
