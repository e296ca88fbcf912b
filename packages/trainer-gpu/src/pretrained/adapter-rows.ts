import * as tf from "@tensorflow/tfjs";
import type { LoraSettings, LoraWeights } from "./lora-state.js";

/**
 * Per-row LoRA adapter selection for one forward pass (vLLM's multi-LoRA batching): every batch row names
 * the adapter it runs with, or runs on the base weights alone, so one batch mixes adapters over one copy
 * of the base. The base product `x W` is computed once for all rows; each adapter's `scale * x A B` only
 * for its own rows (gathered together, so its cost is that of a batch of just those rows) and scattered
 * back in row order.
 */

/** PEFT's name of the adapter `applyLora` adds (the one a model without a selection runs with). */
export const DEFAULT_ADAPTER = "default";

export interface LoraState {
  settings: LoraSettings;
  weights: Map<string, LoraWeights>;
}

/**
 * Which adapters a forward runs with: `true` = the default adapter (when the model has one) on every row,
 * `false` = none, a name = that adapter on every row, or one entry per batch row (a name, `null` = base
 * only, `undefined` = the default adapter).
 */
export type AdapterChoice = boolean | string | ReadonlyArray<string | null | undefined>;

/** Thrown for a selection naming an adapter the model does not have. */
export class UnknownAdapterError extends Error {
  constructor(
    readonly adapter: string,
    known: readonly string[],
  ) {
    super(`No LoRA adapter "${adapter}" (the model has: ${known.length ? known.join(", ") : "none"})`);
    this.name = "UnknownAdapterError";
  }
}

/** How one forward applies the adapters: none, one for every row, or per-row groups. */
export type AdapterPlan =
  | null
  | { kind: "one"; lora: LoraState }
  | {
      kind: "rows";
      /** Flattened token rows (`B * T`) of each adapter, in the order their deltas are concatenated. */
      groups: Array<{ lora: LoraState; idx: tf.Tensor1D; count: number }>;
      /** Rows with no adapter (their delta is zero), concatenated last. */
      baseRows: number;
      /** Position in the concatenation of each flattened row. */
      inverse: tf.Tensor1D;
    };

function lookup(adapters: ReadonlyMap<string, LoraState>, name: string): LoraState {
  const s = adapters.get(name);
  if (!s) throw new UnknownAdapterError(name, [...adapters.keys()]);
  return s;
}

/**
 * The plan of a forward over `B` rows of `T` tokens. Tensors it creates belong to the caller's tidy scope.
 * A selection where every row runs the same adapter (or none) takes the plain path: no gathers.
 */
export function planAdapters(
  adapters: ReadonlyMap<string, LoraState>,
  choice: AdapterChoice,
  B: number,
  T: number,
): AdapterPlan {
  if (choice === false) return null;
  if (choice === true) {
    const d = adapters.get(DEFAULT_ADAPTER);
    return d ? { kind: "one", lora: d } : null;
  }
  if (typeof choice === "string") return { kind: "one", lora: lookup(adapters, choice) };
  if (choice.length !== B) throw new Error(`adapter selection has ${choice.length} entries for ${B} rows`);
  const names = choice.map((c) =>
    c === undefined ? (adapters.has(DEFAULT_ADAPTER) ? DEFAULT_ADAPTER : null) : c,
  );
  const distinct = [...new Set(names)];
  if (distinct.length === 1) {
    const only = distinct[0] as string | null;
    return only === null ? null : { kind: "one", lora: lookup(adapters, only) };
  }
  const order: number[] = [];
  const groups: Array<{ lora: LoraState; idx: tf.Tensor1D; count: number }> = [];
  for (const name of distinct) {
    if (name === null) continue;
    const lora = lookup(adapters, name);
    const rows: number[] = [];
    names.forEach((n, b) => {
      if (n === name) for (let t = 0; t < T; t++) rows.push(b * T + t);
    });
    order.push(...rows);
    groups.push({ lora, idx: tf.tensor1d(rows, "int32"), count: rows.length });
  }
  const baseRows = B * T - order.length;
  names.forEach((n, b) => {
    if (n === null) for (let t = 0; t < T; t++) order.push(b * T + t);
  });
  const inverse = new Int32Array(B * T);
  order.forEach((row, i) => {
    inverse[row] = i;
  });
  return { kind: "rows", groups, baseRows, inverse: tf.tensor1d(inverse, "int32") };
}

/** The adapters' contribution to a linear layer's output at `path` (`null`: nothing to add). */
export function adapterDelta(
  plan: AdapterPlan,
  x: tf.Tensor,
  path: string,
  outFeatures: number,
  mm: (a: tf.Tensor, b: tf.Tensor) => tf.Tensor,
): tf.Tensor | null {
  if (plan === null) return null;
  if (plan.kind === "one") {
    const w = plan.lora.weights.get(path);
    return w ? tf.mul(mm(mm(x, w.a), w.b), plan.lora.settings.scale) : null;
  }
  if (!plan.groups.some((g) => g.lora.weights.has(path))) return null;
  const parts = plan.groups.map((g) => {
    const w = g.lora.weights.get(path);
    if (!w) return tf.zeros([g.count, outFeatures]);
    return tf.mul(mm(mm(tf.gather(x, g.idx), w.a), w.b), g.lora.settings.scale);
  });
  if (plan.baseRows > 0) parts.push(tf.zeros([plan.baseRows, outFeatures]));
  return tf.gather(parts.length === 1 ? (parts[0] as tf.Tensor) : tf.concat(parts, 0), plan.inverse);
}
