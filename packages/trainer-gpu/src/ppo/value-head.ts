import * as tf from "@tensorflow/tfjs-core";
import { type PackedBatch, packBatch, toPacked } from "./batch.js";
import { aggregationWeights, valueLoss } from "./loss.js";
import { type AdamState, AdamW, clipByGlobalNorm } from "./optim.js";
import type { TrainRow } from "./triplet-rows.js";

/**
 * The critic for GAE: a two-layer MLP over the policy's final hidden states. The features are read
 * without gradient, so training the critic never moves the policy (VERL keeps a separate critic
 * model; sharing the trunk read-only costs no extra forward pass over a second transformer).
 */

export interface HiddenStates {
  /** Final hidden states `[B, L, d]` for token ids `[B, L]`. */
  hidden(ids: tf.Tensor2D): tf.Tensor3D;
}

/** Everything a resumed GAE run needs from the critic: its weights and its Adam moments and step. */
export interface ValueHeadState {
  weights: Float32Array[];
  optimizer: AdamState;
}

export class ValueHead {
  readonly w1: tf.Variable;
  readonly b1: tf.Variable;
  readonly w2: tf.Variable;
  readonly b2: tf.Variable;
  readonly optimizer: AdamW;

  constructor(
    readonly inputSize: number,
    hiddenSize: number,
    seed: number,
  ) {
    this.w1 = tf.variable(
      tf.randomNormal([inputSize, hiddenSize], 0, 1 / Math.sqrt(inputSize), "float32", seed),
    );
    this.b1 = tf.variable(tf.zeros([hiddenSize]));
    this.w2 = tf.variable(tf.zeros([hiddenSize, 1]));
    this.b2 = tf.variable(tf.zeros([1]));
    this.optimizer = new AdamW(this.variables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
  }

  get variables(): tf.Variable[] {
    return [this.w1, this.b1, this.w2, this.b2];
  }

  getState(): ValueHeadState {
    return {
      weights: this.variables.map((v) => Float32Array.from(v.dataSync() as Float32Array)),
      optimizer: this.optimizer.getState(),
    };
  }

  setState(state: ValueHeadState): void {
    const vars = this.variables;
    const sizes = vars.map((v) => v.size);
    if (state.weights.length !== vars.length || state.weights.some((w, i) => w.length !== sizes[i])) {
      throw new Error(
        `critic state has weights of sizes [${state.weights.map((w) => w.length)}], the value head [${sizes}] (critic.hidden_size changed?)`,
      );
    }
    tf.tidy(() => {
      for (const [i, w] of state.weights.entries()) vars[i]!.assign(tf.tensor(w, vars[i]!.shape));
    });
    this.optimizer.setState(state.optimizer);
  }

  /** Values `[B, L - 1]` at the target positions (the state before each predicted token). */
  private forward(features: tf.Tensor3D): tf.Tensor2D {
    const [B, L, d] = features.shape;
    const flat = tf.reshape(tf.slice(features, [0, 0, 0], [B, L - 1, d]), [B * (L - 1), d]);
    const h = tf.relu(tf.add(tf.matMul(flat, this.w1), this.b1));
    return tf.reshape(tf.add(tf.matMul(h, this.w2), this.b2), [B, L - 1]) as tf.Tensor2D;
  }

  private features(policy: HiddenStates, packed: PackedBatch): tf.Tensor3D {
    return tf.tidy(() => policy.hidden(tf.tensor2d(packed.ids, [packed.batchSize, packed.length], "int32")));
  }

  /** Per-response-token values of each row. */
  values(policy: HiddenStates, rows: readonly TrainRow[], microBatchRows: number, padId: number): number[][] {
    const out: number[][] = [];
    for (let i = 0; i < rows.length; i += microBatchRows) {
      const micro = rows.slice(i, i + microBatchRows);
      const packed = packBatch(micro, padId);
      const feats = this.features(policy, packed);
      const v = tf.tidy(() => this.forward(feats)).arraySync();
      feats.dispose();
      micro.forEach((r, k) => {
        out.push(v[k]!.slice(packed.responseStart[k]!, packed.responseStart[k]! + r.responseIds.length));
      });
    }
    return out;
  }

  /** One clipped value-loss step per mini-batch; returns the mean loss. */
  update(
    policy: HiddenStates,
    rows: readonly TrainRow[],
    oldValues: readonly number[][],
    returns: readonly number[][],
    o: { miniBatchRows: number; padId: number; lr: number; clip: number; gradClip: number },
  ): { loss: number; gradNorm: number } {
    let total = 0;
    let norms = 0;
    let updates = 0;
    for (let i = 0; i < rows.length; i += o.miniBatchRows) {
      const mini = rows.slice(i, i + o.miniBatchRows);
      const packed = packBatch(mini, o.padId);
      const feats = this.features(policy, packed);
      const weights = aggregationWeights(
        mini.map((r) => r.responseMask),
        "token-mean",
      );
      const T = [packed.batchSize, packed.length - 1] as [number, number];
      const { value, grads } = tf.tidy(() => {
        const w = tf.tensor2d(toPacked(packed, weights), T);
        const old = tf.tensor2d(toPacked(packed, oldValues.slice(i, i + o.miniBatchRows)), T);
        const ret = tf.tensor2d(toPacked(packed, returns.slice(i, i + o.miniBatchRows)), T);
        return tf.variableGrads(() => valueLoss(this.forward(feats), old, ret, w, o.clip), this.variables);
      });
      feats.dispose();
      total += value.dataSync()[0]!;
      value.dispose();
      const list = this.variables.map((v) => grads[v.name]!);
      const clipped = clipByGlobalNorm(list, o.gradClip);
      this.optimizer.apply(clipped.grads, o.lr);
      for (const g of new Set([...list, ...clipped.grads])) g.dispose();
      norms += clipped.norm;
      updates += 1;
    }
    return { loss: total / Math.max(1, updates), gradNorm: norms / Math.max(1, updates) };
  }
}
