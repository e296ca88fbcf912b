import type { GeneratedToken } from "./request.js";
import { logSoftmax, type SamplingParams, sampleToken } from "./sampling.js";

/**
 * Forced decoding for `tool_choice`: the output must begin with one of a few id sequences (e.g. one
 * `<tool_call>{"name": "<fn>", "arguments":` prefix per allowed tool). While the output is still on them,
 * a step may only produce an id that keeps it on one; once one is complete, generation is free.
 */

/** The ids allowed next, or null when the output is no longer constrained (a choice is complete). */
export function allowedNextIds(
  choices: readonly (readonly number[])[],
  produced: readonly GeneratedToken[],
): Set<number> | null {
  const n = produced.length;
  const allowed = new Set<number>();
  for (const choice of choices) {
    let on = true;
    for (let i = 0; i < Math.min(n, choice.length); i++) {
      if (choice[i] !== produced[i]?.id) {
        on = false;
        break;
      }
    }
    if (!on) continue;
    if (choice.length <= n) return null;
    allowed.add(choice[n] as number);
  }
  return allowed.size > 0 ? allowed : null;
}

/**
 * Sample among `allowed` only: the model's distribution (temperature, top-k, top-p as requested)
 * restricted to those ids and renormalised. `logprob` stays the raw model log-probability of the id (what
 * a training forward pass computes); `samplingLogprob` is its log-probability under the restricted
 * distribution, 0 for an id that was the only one allowed (`forced: true`).
 */
export function sampleAllowed(
  logits: ArrayLike<number>,
  allowed: ReadonlySet<number>,
  params: SamplingParams,
  rng: () => number,
): GeneratedToken {
  const raw = logSoftmax(logits);
  if (allowed.size === 1) {
    const [id] = allowed as Set<number>;
    return { id: id as number, logprob: raw[id as number] as number, samplingLogprob: 0, forced: true };
  }
  const masked = new Float32Array(logits.length).fill(Number.NEGATIVE_INFINITY);
  for (const id of allowed) masked[id] = logits[id] as number;
  const token = sampleToken(masked, params, rng);
  return { ...token, logprob: raw[token.id] as number };
}
