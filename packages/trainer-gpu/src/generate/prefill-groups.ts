import * as tf from "@tensorflow/tfjs";
import { commonPrefixLength } from "../model/batch-inputs.js";
import type { CausalLM, LayerKV } from "../model/causal-lm.js";
import { gatherRows } from "../pretrained/gather-rows.js";
import type { PrefixCache, PrefixMatch } from "./prefix-cache.js";

/**
 * Prefill of newly admitted prompts with as little work as the prompts allow. Prompts of one length that
 * reuse the same cached prefix (or none) run together in one forward pass (rows are independent, so each
 * result equals a lone prefill). Within such a group, identical prompts (the `n` choices of one request,
 * a GRPO group's rollouts) are computed once and their rows copied, and, for a model with `prefillAfter`,
 * a prefix all of them share (a tool preamble) runs once. With a prefix cache only the tokens after the
 * cached prefix run, and every prompt's own block-aligned prefix is cached for the requests that follow.
 * All prompts of one call run with one LoRA adapter selection (`adapter`: a name, `null` = the base alone,
 * `undefined` = the model's default); keys and values depend on it, so it also scopes the cache.
 */

/** Shortest in-batch common prefix worth a separate pass. */
const MIN_SHARED_PREFIX = 16;

export interface PrefilledGroup {
  /** Indices of the prompts in this group, in order. */
  members: number[];
  /** Next-token logits, row-major `[members.length, V]`. */
  logits: Float32Array;
  /** The group's KV cache `[members.length, H, length, dh]` (the caller owns it). */
  cache: LayerKV[];
  /** The prompts' length. */
  length: number;
}

export function prefillPrompts(
  model: CausalLM,
  prompts: ReadonlyArray<readonly number[]>,
  prefixCache: PrefixCache | null,
  adapter?: string | null,
): PrefilledGroup[] {
  const cache = prefixCache && model.prefillAfter ? prefixCache : null;
  const scope = adapterScope(adapter);
  const groups = new Map<string, { members: number[]; match: PrefixMatch | null }>();
  prompts.forEach((p, i) => {
    const match = cache ? cache.match(p, scope) : null;
    const key = `${p.length}:${match ? `${match.entry}:${match.length}` : "-"}`;
    const g = groups.get(key);
    if (g) g.members.push(i);
    else groups.set(key, { members: [i], match });
  });
  const out: PrefilledGroup[] = [];
  // Each distinct prompt, and the group and row of `out` holding its keys/values.
  const toCache: Array<{ prompt: readonly number[]; group: number; row: number }> = [];
  try {
    for (const { members, match } of groups.values()) {
      // Distinct prompts of the group, and which of them each member is.
      const distinct = new Map<string, number>();
      const unique: Array<readonly number[]> = [];
      const source = members.map((i) => {
        const p = prompts[i] as readonly number[];
        const key = p.join(",");
        let k = distinct.get(key);
        if (k === undefined) {
          k = unique.length;
          distinct.set(key, k);
          unique.push(p);
        }
        return k;
      });
      const result = prefillDistinct(model, unique, match && cache ? cache.take(match) : null, adapter);
      for (const [r, prompt] of unique.entries())
        toCache.push({ prompt, group: out.length, row: source.indexOf(r) });
      out.push({
        members,
        ...expandRows(result, source, model.config.vocabSize),
        length: unique[0]?.length ?? 0,
      });
    }
  } catch (error) {
    // The caller gets nothing, so nothing it would own may stay allocated.
    for (const g of out) for (const c of g.cache) tf.dispose([c.k, c.v]);
    throw error;
  }
  // Cached only after every group ran: an insert replaces the entries it extends (and may evict the least
  // recently used one), and a later group's match can point at exactly such an entry.
  if (cache)
    for (const { prompt, group, row } of toCache)
      cache.insert(prompt, (out[group] as PrefilledGroup).cache, row, scope);
  return out;
}

/** Prefill distinct equal-length prompts after `prefix` (disposed here), or after their own common prefix. */
function prefillDistinct(
  model: CausalLM,
  prompts: ReadonlyArray<readonly number[]>,
  prefix: LayerKV[] | null,
  adapter: string | null | undefined,
): { logits: Float32Array; cache: LayerKV[] } {
  const rows = (n: number) => (adapter === undefined ? undefined : Array.from({ length: n }, () => adapter));
  let shared = prefix;
  if (!shared && model.prefillAfter && prompts.length > 1) {
    const P = commonPrefixLength(prompts);
    if (P >= MIN_SHARED_PREFIX) {
      const head = model.prefillMany([(prompts[0] as readonly number[]).slice(0, P)], rows(1));
      shared = head.cache;
    }
  }
  if (!shared || !model.prefillAfter) return model.prefillMany(prompts, rows(prompts.length));
  try {
    return model.prefillAfter(shared, prompts, rows(prompts.length));
  } finally {
    for (const c of shared) tf.dispose([c.k, c.v]);
  }
}

/** Rows `source[i]` of a prefill result (logits and cache) for each member; the input is consumed. */
function expandRows(
  r: { logits: Float32Array; cache: LayerKV[] },
  source: number[],
  V: number,
): { logits: Float32Array; cache: LayerKV[] } {
  if (source.every((s, i) => s === i)) return r;
  const logits = new Float32Array(source.length * V);
  source.forEach((s, i) => {
    logits.set(r.logits.subarray(s * V, (s + 1) * V), i * V);
  });
  const cache = r.cache.map((c) => ({ k: gatherRows(c.k, source), v: gatherRows(c.v, source) }));
  for (const c of r.cache) tf.dispose([c.k, c.v]);
  return { logits, cache };
}

/** The prefix-cache scope of an adapter selection (see `PrefixCache.match`). */
function adapterScope(adapter: string | null | undefined): string {
  if (adapter === undefined) return "";
  return adapter === null ? "base" : `adapter:${adapter}`;
}
