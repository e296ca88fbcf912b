/**
 * Token sampling on one row of logits, in plain JS: each sequence's randomness stays independent of how
 * it was batched. Every path is linear in the vocabulary (plus one native numeric sort when top-k/top-p
 * truncates), so a 150k-token vocabulary costs about a millisecond per token, not a comparator sort.
 */

export interface SamplingParams {
  /** 0 = greedy. Default 1. */
  temperature: number;
  /** Nucleus mass in (0, 1]; 1 disables. */
  topP: number;
  /** Keep the k most likely tokens; 0 disables. */
  topK: number;
}

/** A small, fast, seedable PRNG (mulberry32): one per sequence, so batching never changes the draws. */
export function createRng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** log-softmax of `logits / temperature` (temperature 1 = the raw distribution). */
export function logSoftmax(logits: ArrayLike<number>, temperature = 1): Float64Array {
  return softmaxParts(logits, temperature).logprobs;
}

/**
 * log-softmax of `logits / temperature`, with the unnormalised weights `exp(v - max)` and their sum that
 * computing it takes: drawing from those directly saves a second exponential pass over the vocabulary.
 */
function softmaxParts(
  logits: ArrayLike<number>,
  temperature: number,
): { logprobs: Float64Array; weights: Float64Array; total: number } {
  const n = logits.length;
  const out = new Float64Array(n);
  const weights = new Float64Array(n);
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < n; i++) {
    const v = (logits[i] as number) / temperature;
    out[i] = v;
    if (v > max) max = v;
  }
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const w = Math.exp((out[i] as number) - max);
    weights[i] = w;
    sum += w;
  }
  const lse = max + Math.log(sum);
  for (let i = 0; i < n; i++) out[i] = (out[i] as number) - lse;
  return { logprobs: out, weights, total: sum };
}

/** The first index at which the running sum of `weights` exceeds `u` (the last positive one at worst). */
function drawIndex(weights: Float64Array, u: number): number {
  let acc = 0;
  let chosen = -1;
  for (let i = 0; i < weights.length; i++) {
    const w = weights[i] as number;
    if (w === 0) continue;
    chosen = i;
    acc += w;
    if (u < acc) break;
  }
  return chosen;
}

export interface SampledToken {
  id: number;
  /** Log-probability under the model's raw distribution (temperature 1, no top-k/top-p). */
  logprob: number;
  /** Log-probability under the distribution actually sampled from (temperature, top-k, top-p renormalised). */
  samplingLogprob: number;
}

/**
 * `max` and `sum = sum_i exp(v_i - max)` of `v = logits / temperature`, so `log_softmax(v)_i = v_i - (max +
 * log(sum))`; with `weights`, also stores each `exp(v_i - max)` there. The same arithmetic in the same
 * order as `softmaxParts`, so the log-probs and draws are bit-identical to it.
 */
function expSums(
  logits: ArrayLike<number>,
  temperature: number,
  weights?: Float64Array,
): { max: number; sum: number } {
  const n = logits.length;
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < n; i++) {
    const v = (logits[i] as number) / temperature;
    if (v > max) max = v;
  }
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const w = Math.exp((logits[i] as number) / temperature - max);
    if (weights) weights[i] = w;
    sum += w;
  }
  return { max, sum };
}

/** Scratch for the untruncated draw's weights (sampling is synchronous: one row at a time). */
let scratch = new Float64Array(0);

/**
 * Greedy or an untruncated draw without materialising the log-softmax: one max pass and one exponential
 * pass per temperature, and the log-prob of the chosen token only. A decode step samples every row, so
 * this is a per-row cost of the batch (~3 passes and two vocabulary-sized allocations fewer per token).
 */
function sampleUntruncated(logits: ArrayLike<number>, temperature: number, rng: () => number): SampledToken {
  const n = logits.length;
  if (temperature <= 0) {
    const raw = expSums(logits, 1);
    const lse = raw.max + Math.log(raw.sum);
    // The first maximum of the log-probs, not of the logits: subtracting lse can round two nearly equal
    // logits to one log-prob, and the first of them is the greedy token.
    let best = 0;
    let bestLogprob = (logits[0] as number) / 1 - lse;
    for (let i = 1; i < n; i++) {
      const lp = (logits[i] as number) / 1 - lse;
      if (lp > bestLogprob) {
        best = i;
        bestLogprob = lp;
      }
    }
    return { id: best, logprob: bestLogprob, samplingLogprob: 0 };
  }
  if (scratch.length < n) scratch = new Float64Array(n);
  const weights = scratch.subarray(0, n);
  const scaled = expSums(logits, temperature, weights);
  const chosen = drawIndex(weights, rng() * scaled.sum);
  const raw = temperature === 1 ? scaled : expSums(logits, 1);
  return {
    id: chosen,
    logprob: (logits[chosen] as number) / 1 - (raw.max + Math.log(raw.sum)),
    samplingLogprob: (logits[chosen] as number) / temperature - (scaled.max + Math.log(scaled.sum)),
  };
}

export function sampleToken(
  logits: ArrayLike<number>,
  params: SamplingParams,
  rng: () => number,
): SampledToken {
  if (params.temperature <= 0 || ((params.topK <= 0 || params.topK >= logits.length) && params.topP >= 1))
    return sampleUntruncated(logits, params.temperature, rng);
  const rawParts = softmaxParts(logits, 1);
  const raw = rawParts.logprobs;
  const n = raw.length;
  if (params.temperature <= 0) {
    let best = 0;
    for (let i = 1; i < n; i++) if ((raw[i] as number) > (raw[best] as number)) best = i;
    return { id: best, logprob: raw[best] as number, samplingLogprob: 0 };
  }
  const parts = params.temperature === 1 ? rawParts : softmaxParts(logits, params.temperature);
  const scaled = parts.logprobs;
  const keep = keptCount(scaled, params);
  if (keep === n) {
    // Nothing truncated: draw from the softmax's own weights (one pass fewer per token than below).
    const chosen = drawIndex(parts.weights, rng() * parts.total);
    return { id: chosen, logprob: raw[chosen] as number, samplingLogprob: scaled[chosen] as number };
  }
  // The kept set is the `keep` most likely tokens (ties broken by lower id). It is found from a threshold
  // on sorted values instead of sorting the ids with a comparator (~90 ms per token for a 150k vocabulary),
  // and the draw walks the kept tokens in id order: the same distribution, one pass.
  const sorted = Float64Array.from(scaled).sort();
  const threshold = sorted[n - keep] as number;
  let above = 0;
  for (let i = 0; i < n; i++) if ((scaled[i] as number) > threshold) above++;
  const tiesAllowed = keep - above;
  // Unnormalised probabilities of the kept tokens (0 elsewhere), computed once.
  const weights = new Float64Array(n);
  let ties = tiesAllowed;
  let total = 0;
  for (let i = 0; i < n; i++) {
    const v = scaled[i] as number;
    if (v < threshold || (v === threshold && ties-- <= 0)) continue;
    const w = Math.exp(v);
    weights[i] = w;
    total += w;
  }
  const chosen = drawIndex(weights, rng() * total);
  return {
    id: chosen,
    logprob: raw[chosen] as number,
    samplingLogprob: (scaled[chosen] as number) - Math.log(total),
  };
}

/** How many of the most likely tokens top-k and top-p keep (all of them when neither applies). */
function keptCount(scaled: Float64Array, params: SamplingParams): number {
  const n = scaled.length;
  let keep = params.topK > 0 ? Math.min(n, params.topK) : n;
  if (params.topP < 1) {
    const sorted = Float64Array.from(scaled).sort();
    let mass = 0;
    for (let r = 0; r < keep; r++) {
      mass += Math.exp(sorted[n - 1 - r] as number);
      if (mass >= params.topP) {
        keep = r + 1;
        break;
      }
    }
  }
  return keep;
}

/** The k most likely tokens under the raw distribution (ties: lower id first), by insertion into a k-list. */
export function topLogprobs(logits: ArrayLike<number>, k: number): Array<{ id: number; logprob: number }> {
  if (k <= 0) return [];
  const raw = logSoftmax(logits);
  const top: Array<{ id: number; logprob: number }> = [];
  for (let id = 0; id < raw.length; id++) {
    const logprob = raw[id] as number;
    if (top.length === k && logprob <= (top[k - 1] as { logprob: number }).logprob) continue;
    let at = top.length;
    while (at > 0 && (top[at - 1] as { logprob: number }).logprob < logprob) at--;
    top.splice(at, 0, { id, logprob });
    if (top.length > k) top.pop();
  }
  return top;
}
