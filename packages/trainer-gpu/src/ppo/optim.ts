import * as tf from "@tensorflow/tfjs-core";

/**
 * Adam(W) with a learning-rate schedule and global-norm clipping. Written out (rather than
 * tf.train.adam) so its whole state — moments and step — can be checkpointed and restored bit for
 * bit, which an exact resume needs, and so the learning rate can change every step.
 */

export interface ScheduleOptions {
  lr: number;
  warmupSteps: number;
  totalSteps: number;
  style: "constant" | "cosine" | "linear";
  minLrRatio: number;
}

/** Learning rate at (1-based) update step `step`: linear warm-up, then constant/cosine/linear decay. */
export function learningRate(step: number, o: ScheduleOptions): number {
  if (o.warmupSteps > 0 && step <= o.warmupSteps) return (o.lr * step) / o.warmupSteps;
  if (o.style === "constant") return o.lr;
  const decaySteps = Math.max(1, o.totalSteps - o.warmupSteps);
  const progress = Math.min(1, Math.max(0, (step - o.warmupSteps) / decaySteps));
  const floor = o.lr * o.minLrRatio;
  if (o.style === "linear") return floor + (o.lr - floor) * (1 - progress);
  return floor + (o.lr - floor) * 0.5 * (1 + Math.cos(Math.PI * progress));
}

/** Scale gradients so their global L2 norm is at most `maxNorm` (<= 0: no clipping). Returns the norm before. */
export function clipByGlobalNorm(grads: tf.Tensor[], maxNorm: number): { grads: tf.Tensor[]; norm: number } {
  const norm = tf.tidy(() => Math.sqrt(tf.addN(grads.map((g) => tf.sum(tf.square(g)))).dataSync()[0]!));
  if (maxNorm <= 0 || !Number.isFinite(norm) || norm <= maxNorm) return { grads, norm };
  const scale = maxNorm / (norm + 1e-6);
  return { grads: grads.map((g) => tf.mul(g, scale)), norm };
}

/** `acc + grads` element-wise (disposing both), or `grads` when there is nothing yet: gradient
 * accumulation over micro-batches, always in micro-batch order. */
export function addGrads(acc: tf.Tensor[] | null, grads: tf.Tensor[]): tf.Tensor[] {
  if (acc === null) return grads;
  return grads.map((g, k) => {
    const s = tf.add(acc[k]!, g);
    acc[k]!.dispose();
    g.dispose();
    return s;
  });
}

export interface AdamOptions {
  betas: [number, number];
  eps: number;
  weightDecay: number;
}

export interface AdamState {
  step: number;
  m: Float32Array[];
  v: Float32Array[];
}

export class AdamW {
  private readonly m: tf.Variable[];
  private readonly v: tf.Variable[];
  step = 0;

  constructor(
    readonly variables: readonly tf.Variable[],
    private readonly options: AdamOptions,
  ) {
    this.m = variables.map((x) => tf.variable(tf.zerosLike(x), false));
    this.v = variables.map((x) => tf.variable(tf.zerosLike(x), false));
  }

  /** Apply one update with the given gradients (same order as `variables`). */
  apply(grads: readonly tf.Tensor[], lr: number): void {
    this.step += 1;
    const [b1, b2] = this.options.betas;
    const c1 = 1 - b1 ** this.step;
    const c2 = 1 - b2 ** this.step;
    tf.tidy(() => {
      this.variables.forEach((x, i) => {
        const g = grads[i]!;
        const m = tf.add(tf.mul(this.m[i]!, b1), tf.mul(g, 1 - b1));
        const v = tf.add(tf.mul(this.v[i]!, b2), tf.mul(tf.square(g), 1 - b2));
        this.m[i]!.assign(m);
        this.v[i]!.assign(v);
        const update = tf.div(tf.div(m, c1), tf.add(tf.sqrt(tf.div(v, c2)), this.options.eps));
        let next = tf.sub(x, tf.mul(update, lr));
        if (this.options.weightDecay > 0) next = tf.sub(next, tf.mul(x, lr * this.options.weightDecay));
        x.assign(next);
      });
    });
  }

  getState(): AdamState {
    return {
      step: this.step,
      m: this.m.map((t) => t.dataSync() as Float32Array),
      v: this.v.map((t) => t.dataSync() as Float32Array),
    };
  }

  setState(state: AdamState): void {
    if (state.m.length !== this.m.length || state.v.length !== this.v.length) {
      throw new Error(
        `optimizer state has ${state.m.length} slots, the model has ${this.m.length} variables`,
      );
    }
    this.step = state.step;
    tf.tidy(() => {
      for (const [i, arr] of state.m.entries()) this.m[i]!.assign(tf.tensor(arr, this.m[i]!.shape));
      for (const [i, arr] of state.v.entries()) this.v[i]!.assign(tf.tensor(arr, this.v[i]!.shape));
    });
  }

  dispose(): void {
    for (const t of [...this.m, ...this.v]) t.dispose();
  }
}
