import * as tf from "@tensorflow/tfjs";
import { batchInputs, checkLength, NEG_INF, targetLogProbs, toRows } from "./batch-inputs.js";
import type { CausalLM, IdsInput, LayerKV, MaskInput } from "./causal-lm.js";
import { type ModelConfig, type ModelConfigInput, parseModelConfig } from "./config.js";
import { addBias, embedRows, gelu, layerNorm, mm, mmNT } from "./ops.js";

/**
 * A decoder-only, pre-LN transformer with causal attention, written with tfjs ops so it trains on any
 * backend. WASM-specific choices (platform notes): token and position embeddings are one-hot x matrix
 * products (gather has no gradient there), every matmul goes through `mm` (explicit-transpose gradient),
 * and q/k/v are separate weights (rank-5 split is very slow).
 */

export type { IdsInput, LayerKV, MaskInput } from "./causal-lm.js";

let nextInstance = 0;

export class PolicyModel implements CausalLM {
  readonly config: ModelConfig;
  /** Unique prefix of this instance's tfjs variable names (tfjs variable names are global). */
  readonly scope: string;
  private readonly vars = new Map<string, tf.Variable>();
  private fullCausalMask: tf.Tensor | undefined;
  private disposed = false;

  private constructor(config: ModelConfig, init: (name: string, shape: number[], i: number) => tf.Tensor) {
    this.config = config;
    this.scope = `agl_policy_${nextInstance++}`;
    PolicyModel.weightSpecs(config).forEach(([name, shape], i) => {
      const value = init(name, shape, i);
      this.vars.set(name, tf.variable(value, true, `${this.scope}/${name}`));
      value.dispose();
    });
  }

  /** Names and shapes of all weights, in a fixed order (the optimizer-state and checkpoint order). */
  static weightSpecs(c: ModelConfig): Array<[string, number[]]> {
    const d = c.dModel;
    const f = c.dModel * c.ffMult;
    const specs: Array<[string, number[]]> = [
      ["tok_emb", [c.vocabSize, d]],
      ["pos_emb", [c.contextLength, d]],
    ];
    for (let l = 0; l < c.nLayers; l++) {
      specs.push(
        [`l${l}.ln1.g`, [d]],
        [`l${l}.ln1.b`, [d]],
        [`l${l}.wq`, [d, d]],
        [`l${l}.wk`, [d, d]],
        [`l${l}.wv`, [d, d]],
        [`l${l}.wo`, [d, d]],
        [`l${l}.ln2.g`, [d]],
        [`l${l}.ln2.b`, [d]],
        [`l${l}.w1`, [d, f]],
        [`l${l}.b1`, [f]],
        [`l${l}.w2`, [f, d]],
        [`l${l}.b2`, [d]],
      );
    }
    specs.push(["lnf.g", [d]], ["lnf.b", [d]]);
    if (!c.tieEmbeddings) specs.push(["head", [d, c.vocabSize]]);
    return specs;
  }

  /** A freshly initialised model; the same config (including `seed`) always gives the same weights. */
  static create(config: ModelConfigInput): PolicyModel {
    const cfg = parseModelConfig(config);
    const residualStd = 0.02 / Math.sqrt(2 * cfg.nLayers);
    return new PolicyModel(cfg, (name, shape, i) => {
      if (name.endsWith(".g")) return tf.ones(shape);
      if (/\.(b|b1|b2)$/.test(name)) return tf.zeros(shape);
      const std = /\.(wo|w2)$/.test(name) ? residualStd : 0.02;
      // Seeds derived per weight so adding layers does not reshuffle the others' init.
      return tf.randomNormal(shape, 0, std, "float32", cfg.seed * 1000 + i + 1);
    });
  }

  /** Build a model from named weight values (checkpoint load); shapes are checked. */
  static fromWeights(config: ModelConfigInput, weights: ReadonlyMap<string, tf.Tensor>): PolicyModel {
    const cfg = parseModelConfig(config);
    return new PolicyModel(cfg, (name, shape) => {
      const w = weights.get(name);
      if (!w) throw new Error(`Missing weight "${name}"`);
      if (w.shape.join(",") !== shape.join(",")) {
        throw new Error(`Weight "${name}" has shape [${w.shape}] but the config needs [${shape}]`);
      }
      return w.clone();
    });
  }

  /** All trainable variables in a fixed order. */
  get trainableVariables(): tf.Variable[] {
    return [...this.vars.values()];
  }

  /** Relative weight names in the same order as `trainableVariables`. */
  get weightNames(): string[] {
    return [...this.vars.keys()];
  }

  /** `[name, variable]` of every weight, in `trainableVariables` order (all are trainable). */
  namedParameters(_options: { trainable?: boolean } = {}): Array<[string, tf.Variable]> {
    return [...this.vars.entries()];
  }

  variable(name: string): tf.Variable {
    const v = this.vars.get(name);
    if (!v) throw new Error(`No weight "${name}"`);
    return v;
  }

  /** Total number of parameters. */
  get parameterCount(): number {
    let n = 0;
    for (const v of this.vars.values()) n += v.size;
    return n;
  }

  /** Parameters taking part in dense matmuls per token (excludes the one-hot embedding tables). */
  get matmulParameterCount(): number {
    const c = this.config;
    const d = c.dModel;
    return c.nLayers * (4 * d * d + 2 * d * d * c.ffMult) + d * c.vocabSize;
  }

  /** An independent copy (e.g. the frozen reference policy for KL); its variables are not trainable. */
  clone(options: { trainable?: boolean } = {}): PolicyModel {
    const copy = new PolicyModel(this.config, (name) => this.variable(name).clone());
    if (options.trainable === false) for (const v of copy.vars.values()) v.trainable = false;
    return copy;
  }

  /** The frozen KL reference: a non-trainable copy. */
  frozenReference(): PolicyModel {
    return this.clone({ trainable: false });
  }

  /** Copy every weight value from another model of the same shape. */
  setWeightsFrom(other: CausalLM): void {
    if (!(other instanceof PolicyModel)) throw new Error("setWeightsFrom needs another PolicyModel");
    for (const [name, v] of this.vars) v.assign(other.variable(name));
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const v of this.vars.values()) v.dispose();
    this.fullCausalMask?.dispose();
    this.vars.clear();
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  /** `[1,1,T,T]` additive causal mask, sliced from one cached context-sized mask. */
  private causalMask(T: number): tf.Tensor {
    const C = this.config.contextLength;
    if (!this.fullCausalMask) {
      const data = new Float32Array(C * C);
      for (let i = 0; i < C; i++) data.fill(NEG_INF, i * C + i + 1, (i + 1) * C);
      this.fullCausalMask = tf.keep(tf.tensor4d(data, [1, 1, C, C]));
    }
    return T === C ? this.fullCausalMask : tf.slice(this.fullCausalMask, [0, 0, 0, 0], [1, 1, T, T]);
  }

  /** Token + position embeddings of flat ids `[N]` at flat positions `[N]` (or 0..T-1 per row). */
  private embed(flatIds: Int32Array, B: number, T: number, positions?: Int32Array): tf.Tensor2D {
    const c = this.config;
    const tok = embedRows(this.variable("tok_emb") as tf.Tensor2D, flatIds);
    if (positions)
      return tf.add(tok, embedRows(this.variable("pos_emb") as tf.Tensor2D, positions)) as tf.Tensor2D;
    const pos = tf.slice(this.variable("pos_emb"), [0, 0], [T, c.dModel]);
    return tf.reshape(tf.add(tf.reshape(tok, [B, T, c.dModel]), pos), [B * T, c.dModel]);
  }

  /**
   * Run the blocks on `x [B*T,d]`. `bias` is added to attention scores (causal and/or padding masks);
   * with `past`, the new keys/values are appended to it (incremental decoding).
   */
  private blocks(
    x: tf.Tensor2D,
    B: number,
    T: number,
    bias: tf.Tensor,
    past?: LayerKV[],
  ): { h: tf.Tensor2D; kv: LayerKV[] } {
    const c = this.config;
    const H = c.nHeads;
    const dh = c.dModel / H;
    const scale = 1 / Math.sqrt(dh);
    const kv: LayerKV[] = [];
    let h: tf.Tensor = x;
    for (let l = 0; l < c.nLayers; l++) {
      const w = (n: string) => this.variable(`l${l}.${n}`);
      const xn = layerNorm(h, w("ln1.g"), w("ln1.b"));
      const q = tf.transpose(tf.reshape(mm(xn, w("wq")), [B, T, H, dh]), [0, 2, 1, 3]);
      let k = tf.transpose(tf.reshape(mm(xn, w("wk")), [B, T, H, dh]), [0, 2, 1, 3]) as tf.Tensor4D;
      let v = tf.transpose(tf.reshape(mm(xn, w("wv")), [B, T, H, dh]), [0, 2, 1, 3]) as tf.Tensor4D;
      if (past) {
        const p = past[l] as LayerKV;
        k = tf.concat([p.k, k], 2);
        v = tf.concat([p.v, v], 2);
      }
      kv.push({ k, v });
      const scores = tf.add(mmNT(tf.mul(q, scale), k), bias);
      const attn = mm(tf.softmax(scores), v);
      const merged = tf.reshape(tf.transpose(attn, [0, 2, 1, 3]), [B * T, c.dModel]);
      h = tf.add(h, mm(merged, w("wo")));
      const xn2 = layerNorm(h, w("ln2.g"), w("ln2.b"));
      const ff = mm(gelu(addBias(mm(xn2, w("w1")), w("b1"))), w("w2"));
      h = tf.add(h, addBias(ff, w("b2")));
    }
    return { h: layerNorm(h, this.variable("lnf.g"), this.variable("lnf.b")) as tf.Tensor2D, kv };
  }

  /**
   * Final hidden states `[B,T,d]` and the attention bias for a batch. With an attention mask (1 = token,
   * 0 = padding, left or right), padded keys are masked and positions count real tokens only, so a
   * left-padded row gets exactly the numbers it would get alone.
   */
  private forwardHidden(
    inputIds: IdsInput,
    attentionMask?: MaskInput,
  ): { h: tf.Tensor2D; B: number; T: number } {
    const { B, T, flat, positions, keyBias } = batchInputs(
      inputIds,
      attentionMask,
      this.config.contextLength,
    );
    let bias: tf.Tensor = this.causalMask(T);
    if (keyBias) bias = tf.add(bias, tf.tensor4d(keyBias, [B, 1, 1, T]));
    const x = this.embed(flat, B, T, positions);
    return { h: this.blocks(x, B, T, bias).h, B, T };
  }

  /** The output projection `[d, V]`: the `head` weight, or the transposed token embedding when tied.
   * Call inside a tidy (the transpose is a new tensor, differentiable into the embedding). */
  private head(): tf.Tensor2D {
    if (this.config.tieEmbeddings) return tf.transpose(this.variable("tok_emb")) as tf.Tensor2D;
    return this.variable("head") as tf.Tensor2D;
  }

  /** Final-layer hidden states `[B,T,d]` (for value heads). */
  hidden(inputIds: IdsInput, attentionMask?: MaskInput): tf.Tensor3D {
    return tf.tidy(() => {
      const { h, B, T } = this.forwardHidden(inputIds, attentionMask);
      return tf.reshape(h, [B, T, this.config.dModel]);
    });
  }

  /**
   * Next-token logits `[B,T,V]` for every position. Differentiable. Like every public method it frees its
   * intermediates (tidy also works under variableGrads): the caller owns and disposes only the result.
   */
  logits(inputIds: IdsInput, attentionMask?: MaskInput): tf.Tensor3D {
    return tf.tidy(() => {
      const { h, B, T } = this.forwardHidden(inputIds, attentionMask);
      return tf.reshape(mm(h, this.head()), [B, T, this.config.vocabSize]);
    });
  }

  /**
   * Log-probability `[B,T-1]` of each token `inputIds[:, t+1]` given the tokens up to `t` (temperature 1).
   * Differentiable: use inside `tf.variableGrads` / `optimizer.minimize`. Mask the result yourself (e.g.
   * with the assistant/response mask shifted by one: `mask[:, 1:]`).
   */
  tokenLogProbs(
    inputIds: IdsInput,
    attentionMask?: MaskInput,
    options: { temperature?: number } = {},
  ): tf.Tensor2D {
    return this.targetLogProbs(inputIds, attentionMask, options.temperature ?? 1, false).logProbs;
  }

  /** `tokenLogProbs` plus the entropy `[B,T-1]` of each next-token distribution. */
  tokenLogProbsWithEntropy(
    inputIds: IdsInput,
    attentionMask?: MaskInput,
    options: { temperature?: number } = {},
  ): { logProbs: tf.Tensor2D; entropy: tf.Tensor2D } {
    const { logProbs, entropy } = this.targetLogProbs(
      inputIds,
      attentionMask,
      options.temperature ?? 1,
      true,
    );
    return { logProbs, entropy: entropy as tf.Tensor2D };
  }

  private targetLogProbs(
    inputIds: IdsInput,
    attentionMask: MaskInput | undefined,
    temperature: number,
    withEntropy: boolean,
  ): { logProbs: tf.Tensor2D; entropy?: tf.Tensor2D } {
    const rows = toRows(inputIds);
    if ((rows[0]?.length ?? 0) < 2) throw new Error("tokenLogProbs needs sequences of at least 2 tokens");
    return tf.tidy(() => targetLogProbs(this.logits(rows, attentionMask), rows, temperature, withEntropy));
  }

  /**
   * Prefill one prompt for incremental decoding: returns the logits after the last prompt token `[V]`
   * and the per-layer cache (`[1,H,P,dh]` keys and values), which the caller owns and must dispose.
   */
  prefill(ids: readonly number[]): { logits: Float32Array; cache: LayerKV[] } {
    return this.prefillMany([ids]);
  }

  /**
   * Prefill `n` prompts of the SAME length together (rows are computed independently, exactly as alone):
   * logits after each prompt's last token (`[n*V]`, row-major) and the cache `[n,H,P,dh]` per layer.
   */
  prefillMany(prompts: ReadonlyArray<readonly number[]>): { logits: Float32Array; cache: LayerKV[] } {
    const n = prompts.length;
    const T = prompts[0]?.length ?? 0;
    if (n === 0 || T === 0) throw new Error("prefill needs at least one non-empty prompt");
    if (prompts.some((p) => p.length !== T)) throw new Error("prefillMany needs prompts of equal length");
    checkLength(T, this.config.contextLength);
    const flat = new Int32Array(n * T);
    prompts.forEach((p, i) => {
      flat.set(p, i * T);
    });
    const result = tf.tidy(() => {
      const x = this.embed(flat, n, T);
      const { h, kv } = this.blocks(x, n, T, this.causalMask(T));
      const last = tf.reshape(
        tf.slice(tf.reshape(h, [n, T, this.config.dModel]), [0, T - 1, 0], [n, 1, this.config.dModel]),
        [n, this.config.dModel],
      );
      const logits = mm(last, this.head());
      return { logits, kv: kv.map((e) => ({ k: e.k, v: e.v })) };
    });
    const logits = Float32Array.from(result.logits.dataSync() as Float32Array);
    result.logits.dispose();
    return { logits, cache: result.kv };
  }

  /**
   * One decode step for `S` sequences: `tokens[i]` at `positions[i]`, attending to `cache` (`L` columns)
   * plus itself. `keyBias [S,1,1,L+1]` masks unused cache columns with a large negative value. Returns the
   * logits `[S,V]` and the extended cache (new tensors; the caller disposes the old and new ones).
   */
  decodeStep(
    tokens: readonly number[],
    positions: readonly number[],
    cache: LayerKV[],
    keyBias: tf.Tensor4D,
  ): { logits: Float32Array; cache: LayerKV[] } {
    const S = tokens.length;
    for (const p of positions)
      if (p >= this.config.contextLength) checkLength(p + 1, this.config.contextLength);
    const result = tf.tidy(() => {
      const x = this.embed(Int32Array.from(tokens), S, 1, Int32Array.from(positions));
      const { h, kv } = this.blocks(x, S, 1, keyBias, cache);
      return { logits: mm(h, this.head()), kv: kv.map((e) => ({ k: e.k, v: e.v })) };
    });
    const logits = Float32Array.from(result.logits.dataSync() as Float32Array);
    result.logits.dispose();
    return { logits, cache: result.kv };
  }
}
