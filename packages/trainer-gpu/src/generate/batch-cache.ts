import * as tf from "@tensorflow/tfjs";
import type { LayerKV } from "../model/causal-lm.js";
import { gatherRows } from "../pretrained/gather-rows.js";

/**
 * The KV cache of a dynamic batch: one `[S, H, L, dh]` key and value tensor per layer, right-aligned.
 * Every decode step appends one column for all rows, so a row of length n occupies the last n columns;
 * `startCol[i]` columns before it are padding that the attention bias masks out.
 */
export class BatchCache {
  private layers: LayerKV[] | undefined;
  /** Columns (time steps) currently held. */
  width = 0;
  /** First used column of each row, in row order. */
  startCol: number[] = [];

  get rows(): number {
    return this.startCol.length;
  }

  get current(): LayerKV[] {
    if (!this.layers) throw new Error("BatchCache is empty");
    return this.layers;
  }

  /**
   * Add prefilled rows (`[n,H,P,dh]` per layer; ownership moves here), padding the narrower side on the
   * left so every row stays right-aligned.
   */
  addRows(fresh: LayerKV[], P: number): void {
    const n = fresh[0]?.k.shape[0] ?? 0;
    if (!this.layers) {
      this.layers = fresh;
      this.width = P;
      this.startCol = new Array<number>(n).fill(0);
      return;
    }
    const L = this.width;
    const grow = Math.max(0, P - L);
    const padNew = Math.max(0, L - P);
    const pad = (t: tf.Tensor4D, n: number) =>
      n
        ? tf.pad(t, [
            [0, 0],
            [0, 0],
            [n, 0],
            [0, 0],
          ])
        : t;
    this.layers = this.layers.map((old, l) => {
      const row = fresh[l] as LayerKV;
      const merged = tf.tidy(() => ({
        k: tf.concat([pad(old.k, grow), pad(row.k, padNew)], 0) as tf.Tensor4D,
        v: tf.concat([pad(old.v, grow), pad(row.v, padNew)], 0) as tf.Tensor4D,
      }));
      tf.dispose([old.k, old.v, row.k, row.v]);
      return merged;
    });
    this.startCol = [...this.startCol.map((s) => s + grow), ...new Array<number>(n).fill(padNew)];
    this.width = L + grow;
  }

  /** Additive attention bias `[S,1,1,L+1]` for the next step: padding columns get -1e9. */
  stepBias(): tf.Tensor4D {
    const S = this.rows;
    const L = this.width;
    const bias = new Float32Array(S * (L + 1));
    this.startCol.forEach((start, i) => {
      bias.fill(-1e9, i * (L + 1), i * (L + 1) + start);
    });
    return tf.tensor4d(bias, [S, 1, 1, L + 1]);
  }

  /** Take the caches a decode step returned (one column wider); the old ones are disposed. */
  advance(next: LayerKV[]): void {
    this.disposeLayers();
    this.layers = next;
    this.width += 1;
  }

  /** Keep only `rows` (indices, in order) and drop the leading columns none of them uses. */
  keepRows(rows: number[]): void {
    if (rows.length === 0) {
      this.reset();
      return;
    }
    const kept = rows.map((i) => this.startCol[i] as number);
    const minStart = Math.min(...kept);
    const cols = this.width - minStart;
    this.layers = this.current.map((c) => {
      const [, H, , dh] = c.k.shape;
      const out = tf.tidy(() => ({
        k: tf.slice(gatherRows(c.k, rows), [0, 0, minStart, 0], [rows.length, H, cols, dh]) as tf.Tensor4D,
        v: tf.slice(gatherRows(c.v, rows), [0, 0, minStart, 0], [rows.length, H, cols, dh]) as tf.Tensor4D,
      }));
      tf.dispose([c.k, c.v]);
      return out;
    });
    this.width = cols;
    this.startCol = kept.map((s) => s - minStart);
  }

  reset(): void {
    this.disposeLayers();
    this.layers = undefined;
    this.width = 0;
    this.startCol = [];
  }

  private disposeLayers(): void {
    for (const c of this.layers ?? []) tf.dispose([c.k, c.v]);
  }
}
