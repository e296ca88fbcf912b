import * as tf from "@tensorflow/tfjs";
import type { LoraSettings, LoraWeights } from "./lora-state.js";

/**
 * Per-row LoRA adapter selection for one forward pass (vLLM's multi-LoRA batching): every batch row names
 * the adapter it runs with, or runs on the base weights alone, so one batch mixes adapters over one copy
 * of the base. The base product `x W` is computed once for all rows; the adapters' products in two
 * matmuls for the whole batch, whatever the number of adapters (the idea of vLLM's Punica kernels):
 * `x [A_1 … A_K]` gives every row its projection on every adapter's A, a per-row mask keeps (and scales)
 * only the columns of the row's own adapter, and `[B_1; …; B_K]` maps them back. Op count, not FLOPs,
 * dominates small-model forwards on WASM, so this beats gathering each adapter's rows.
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

/** A copy of `lora` as new variables of the model with tfjs scope `scope` (PEFT's default adapter unnamed). */
export function cloneLora(lora: LoraState, scope: string, name: string): LoraState {
  const weights = new Map<string, LoraWeights>();
  const prefix = name === DEFAULT_ADAPTER ? scope : `${scope}/${name}`;
  for (const [path, w] of lora.weights) {
    weights.set(path, {
      a: tf.variable(w.a.clone(), true, `${prefix}/${path}.lora_A`),
      b: tf.variable(w.b.clone(), true, `${prefix}/${path}.lora_B`),
    });
  }
  return { settings: { ...lora.settings }, weights };
}

/** Number of parameters of an adapter (its A and B matrices). */
export function loraSize(lora: LoraState): number {
  let n = 0;
  for (const w of lora.weights.values()) n += w.a.size + w.b.size;
  return n;
}

/** Copy `from`'s adapter values into `into` (same sites); `name` only for the error. */
export function assignLora(into: LoraState, from: LoraState | undefined, name: string): void {
  for (const [path, w] of into.weights) {
    const o = from?.weights.get(path);
    if (!o) throw new Error(`setWeightsFrom: the other model has no LoRA adapter "${name}" on ${path}`);
    w.a.assign(o.a);
    w.b.assign(o.b);
  }
}

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

/** How one forward applies the adapters: none, one for every row, or per-row. */
export type AdapterPlan =
  | null
  | { kind: "one"; lora: LoraState }
  | {
      kind: "rows";
      /** The adapters some row runs with. */
      loras: LoraState[];
      /** Index into `loras` of each flattened row (`B * T`), -1 for the base alone. */
      rowAdapter: Int32Array;
      /** Column masks by the set of adapters present at a site (built once per forward). */
      masks: Map<string, tf.Tensor2D>;
    };

function lookup(adapters: ReadonlyMap<string, LoraState>, name: string): LoraState {
  const s = adapters.get(name);
  if (!s) throw new UnknownAdapterError(name, [...adapters.keys()]);
  return s;
}

/**
 * The plan of a forward over `B` rows of `T` tokens. Tensors it creates belong to the caller's tidy scope.
 * A selection where every row runs the same adapter (or none) takes the plain path.
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
  const used = distinct.filter((n): n is string => n !== null);
  const loras = used.map((n) => lookup(adapters, n));
  const rowAdapter = new Int32Array(B * T);
  names.forEach((n, b) => {
    rowAdapter.fill(n === null ? -1 : used.indexOf(n), b * T, (b + 1) * T);
  });
  return { kind: "rows", loras, rowAdapter, masks: new Map() };
}

/** The adapters' contribution to a linear layer's output at `path` (`null`: nothing to add). */
export function adapterDelta(
  plan: AdapterPlan,
  x: tf.Tensor,
  path: string,
  mm: (a: tf.Tensor, b: tf.Tensor) => tf.Tensor,
): tf.Tensor | null {
  if (plan === null) return null;
  if (plan.kind === "one") {
    const w = plan.lora.weights.get(path);
    // The scale multiplies the rank-r product, not the [rows, out] delta: r columns instead of `out`.
    return w ? mm(tf.mul(mm(x, w.a), plan.lora.settings.scale), w.b) : null;
  }
  const present: number[] = [];
  plan.loras.forEach((l, k) => {
    if (l.weights.has(path)) present.push(k);
  });
  if (present.length === 0) return null;
  const key = present.join(",");
  let mask = plan.masks.get(key);
  if (!mask) {
    // Column block of each present adapter, valued at its scale on its own rows, 0 elsewhere.
    const ranks = present.map((k) => plan.loras[k]!.settings.rank);
    const offsets = ranks.map((_, i) => ranks.slice(0, i).reduce((a, b) => a + b, 0));
    const R = ranks.reduce((a, b) => a + b, 0);
    const N = plan.rowAdapter.length;
    const data = new Float32Array(N * R);
    for (let i = 0; i < N; i++) {
      const at = present.indexOf(plan.rowAdapter[i]!);
      if (at < 0) continue;
      data.fill(
        plan.loras[present[at]!]!.settings.scale,
        i * R + offsets[at]!,
        i * R + offsets[at]! + ranks[at]!,
      );
    }
    mask = tf.tensor2d(data, [N, R]);
    plan.masks.set(key, mask);
  }
  const ws = present.map((k) => plan.loras[k]!.weights.get(path)!);
  const a =
    ws.length === 1
      ? ws[0]!.a
      : tf.concat(
          ws.map((w) => w.a),
          1,
        );
  const b =
    ws.length === 1
      ? ws[0]!.b
      : tf.concat(
          ws.map((w) => w.b),
          0,
        );
  return mm(tf.mul(mm(x, a), mask), b);
}
