import * as tf from "@tensorflow/tfjs";
import type { LayerKV } from "../model/causal-lm.js";

/**
 * Automatic prefix caching for generation (as vLLM's): the keys and values of prompt prefixes already
 * prefilled, kept so a request that starts with the same tokens (the tool preamble every request of an
 * agent carries) prefills only the rest. Entries are keyed on token ids and reused in whole blocks of
 * `blockSize` tokens: a prompt matches the longest block-aligned prefix it shares with any entry (always
 * leaving at least its last token to prefill, whose logits start sampling). Memory is bounded by
 * `maxBytes`, evicting the least recently used entry first; the owner clears the cache whenever the
 * weights change, since cached keys and values belong to the weights that computed them.
 */

export interface PrefixCacheOptions {
  /** Most bytes of cached keys/values (default 64 MiB). */
  maxBytes?: number;
  /** Granularity of reuse in tokens (default 16). */
  blockSize?: number;
}

export interface PrefixCacheStats {
  entries: number;
  tokens: number;
  bytes: number;
  /** Prompts that reused a cached prefix, and those that did not. */
  hits: number;
  misses: number;
  /** Prompt tokens whose prefill the cache saved. */
  reusedTokens: number;
  evictions: number;
}

/** A cached prefix a prompt can reuse: the entry and how many of its tokens. */
export interface PrefixMatch {
  entry: number;
  length: number;
}

interface Entry {
  id: number;
  scope: string;
  ids: readonly number[];
  /** `[1, H, ids.length, dh]` keys and values per layer. */
  kv: LayerKV[];
  bytes: number;
  used: number;
}

export class PrefixCache {
  readonly maxBytes: number;
  readonly blockSize: number;
  private entries: Entry[] = [];
  private clock = 0;
  private nextId = 0;
  private stamp: readonly object[] | undefined;
  private stats = { hits: 0, misses: 0, reusedTokens: 0, evictions: 0 };

  constructor(options: PrefixCacheOptions = {}) {
    this.maxBytes = options.maxBytes ?? 64 * 2 ** 20;
    this.blockSize = options.blockSize ?? 16;
    if (!(this.blockSize >= 1 && Number.isInteger(this.blockSize)))
      throw new RangeError(`prefix cache blockSize must be a positive integer (got ${this.blockSize})`);
    if (!(this.maxBytes >= 0))
      throw new RangeError(`prefix cache maxBytes must be >= 0 (got ${this.maxBytes})`);
  }

  get bytes(): number {
    return this.entries.reduce((n, e) => n + e.bytes, 0);
  }

  getStats(): PrefixCacheStats {
    return {
      entries: this.entries.length,
      tokens: this.entries.reduce((n, e) => n + e.ids.length, 0),
      bytes: this.bytes,
      ...this.stats,
    };
  }

  /**
   * The longest cached block-aligned prefix of `prompt` shorter than the prompt, or null (counted). Only
   * entries of the same `scope` match: keys and values depend on the weights that computed them, so
   * requests served with different LoRA adapters must pass different scopes (e.g. the adapter's name).
   */
  match(prompt: readonly number[], scope = ""): PrefixMatch | null {
    let best: Entry | undefined;
    let bestLength = 0;
    for (const e of this.entries) {
      if (e.scope !== scope) continue;
      const n = Math.min(e.ids.length, prompt.length - 1);
      let p = 0;
      while (p < n && e.ids[p] === prompt[p]) p++;
      const aligned = p - (p % this.blockSize);
      if (aligned > bestLength) {
        best = e;
        bestLength = aligned;
      }
    }
    if (!best) {
      this.stats.misses++;
      return null;
    }
    best.used = ++this.clock;
    this.stats.hits++;
    this.stats.reusedTokens += bestLength;
    return { entry: best.id, length: bestLength };
  }

  /** Keys and values `[1, H, length, dh]` per layer of a match (new tensors: the caller disposes them). */
  take(m: PrefixMatch): LayerKV[] {
    const e = this.entries.find((x) => x.id === m.entry);
    if (!e) throw new Error(`prefix cache entry ${m.entry} was evicted`);
    const L = m.length;
    const part = (t: tf.Tensor4D) =>
      (L === e.ids.length
        ? tf.clone(t)
        : tf.slice(t, [0, 0, 0, 0], [1, t.shape[1], L, t.shape[3]])) as tf.Tensor4D;
    return e.kv.map((c) => ({ k: part(c.k), v: part(c.v) }));
  }

  /**
   * Clear the cache if the weights changed since the last call (`stamp`: identities of the current
   * weight buffers, see `weightsStamp`). Returns whether it cleared.
   */
  validate(stamp: readonly object[]): boolean {
    const same =
      this.stamp !== undefined &&
      this.stamp.length === stamp.length &&
      this.stamp.every((x, i) => x === stamp[i]);
    this.stamp = stamp;
    if (same || this.entries.length === 0) return false;
    this.clear();
    return true;
  }

  /**
   * Remember the block-aligned prefix of `prompt` from `cache`, the prefill's keys/values `[n, H, T, dh]`
   * in which `prompt` is row `row` (not taken over: the slices are copies), under `scope` (see `match`). A
   * prefix an entry already holds only refreshes that entry; entries the new one extends are replaced.
   */
  insert(prompt: readonly number[], cache: readonly LayerKV[], row: number, scope = ""): void {
    const A = prompt.length - (prompt.length % this.blockSize);
    if (A === 0) return;
    const ids = prompt.slice(0, A);
    const startsWith = (long: readonly number[], short: readonly number[]) =>
      short.length <= long.length && short.every((x, i) => long[i] === x);
    const mine = this.entries.filter((e) => e.scope === scope);
    const covering = mine.find((e) => startsWith(e.ids, ids));
    if (covering) {
      covering.used = ++this.clock;
      return;
    }
    for (const e of mine.filter((x) => startsWith(ids, x.ids))) this.remove(e);
    const kv = tf.tidy(() =>
      cache.map((c) => {
        const [, H, , dh] = c.k.shape;
        return {
          k: tf.keep(tf.slice(c.k, [row, 0, 0, 0], [1, H, A, dh])) as tf.Tensor4D,
          v: tf.keep(tf.slice(c.v, [row, 0, 0, 0], [1, H, A, dh])) as tf.Tensor4D,
        };
      }),
    );
    const bytes = kv.reduce((n, c) => n + 4 * (c.k.size + c.v.size), 0);
    if (bytes > this.maxBytes) {
      for (const c of kv) tf.dispose([c.k, c.v]);
      return;
    }
    this.entries.push({ id: this.nextId++, scope, ids, kv, bytes, used: ++this.clock });
    while (this.bytes > this.maxBytes) {
      const lru = this.entries.reduce((a, b) => (b.used < a.used ? b : a));
      this.remove(lru);
      this.stats.evictions++;
    }
  }

  /** Drop every entry (weights changed). */
  clear(): void {
    for (const e of [...this.entries]) this.remove(e);
  }

  private remove(e: Entry): void {
    this.entries = this.entries.filter((x) => x !== e);
    for (const c of e.kv) tf.dispose([c.k, c.v]);
  }
}

/**
 * Identities of every tfjs variable's current buffer. `Variable.assign` (optimizer steps, `setWeightsFrom`,
 * a worker receiving broadcast weights) gives a variable a new buffer, so any weight change anywhere in the
 * process changes the stamp: conservative (an unrelated variable's update also clears the cache) but never
 * stale, whoever changed the weights and however.
 */
export function weightsStamp(): object[] {
  const vars = tf.engine().state.registeredVariables;
  return Object.keys(vars).map((name) => (vars[name] as tf.Variable).dataId);
}
