/**
 * Token sampling on one row of logits, in plain JS (the vocabulary is ~100 entries, so this costs
 * microseconds and keeps each sequence's randomness independent of how it was batched).
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
  const n = logits.length;
  const out = new Float64Array(n);
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < n; i++) {
    const v = (logits[i] as number) / temperature;
    out[i] = v;
    if (v > max) max = v;
  }
  let sum = 0;
  for (let i = 0; i < n; i++) sum += Math.exp((out[i] as number) - max);
  const lse = max + Math.log(sum);
  for (let i = 0; i < n; i++) out[i] = (out[i] as number) - lse;
  return out;
}

export interface SampledToken {
  id: number;
  /** Log-probability under the model's raw distribution (temperature 1, no top-k/top-p). */
  logprob: number;
  /** Log-probability under the distribution actually sampled from (temperature, top-k, top-p renormalised). */
  samplingLogprob: number;
}

export function sampleToken(
  logits: ArrayLike<number>,
  params: SamplingParams,
  rng: () => number,
): SampledToken {
  const raw = logSoftmax(logits);
  const n = raw.length;
  if (params.temperature <= 0) {
    let best = 0;
    for (let i = 1; i < n; i++) if ((raw[i] as number) > (raw[best] as number)) best = i;
    return { id: best, logprob: raw[best] as number, samplingLogprob: 0 };
  }
  const scaled = params.temperature === 1 ? raw : logSoftmax(logits, params.temperature);
  const order = Array.from({ length: n }, (_, i) => i).sort(
    (a, b) => (scaled[b] as number) - (scaled[a] as number),
  );
  let keep = n;
  if (params.topK > 0) keep = Math.min(keep, params.topK);
  if (params.topP < 1) {
    let mass = 0;
    for (let r = 0; r < keep; r++) {
      mass += Math.exp(scaled[order[r] as number] as number);
      if (mass >= params.topP) {
        keep = r + 1;
        break;
      }
    }
  }
  let total = 0;
  for (let r = 0; r < keep; r++) total += Math.exp(scaled[order[r] as number] as number);
  const u = rng() * total;
  let acc = 0;
  let chosen = order[keep - 1] as number;
  for (let r = 0; r < keep; r++) {
    const id = order[r] as number;
    acc += Math.exp(scaled[id] as number);
    if (u < acc) {
      chosen = id;
      break;
    }
  }
  return {
    id: chosen,
    logprob: raw[chosen] as number,
    samplingLogprob: (scaled[chosen] as number) - Math.log(total),
  };
}

/** The k most likely tokens under the raw distribution. */
export function topLogprobs(logits: ArrayLike<number>, k: number): Array<{ id: number; logprob: number }> {
  if (k <= 0) return [];
  const raw = logSoftmax(logits);
  return Array.from(raw, (logprob, id) => ({ id, logprob }))
    .sort((a, b) => b.logprob - a.logprob)
    .slice(0, k);
}
