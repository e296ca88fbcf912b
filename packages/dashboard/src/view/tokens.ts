import type { TrajectorySequence } from "@agl/adapter";
import type { Triplet } from "@agl/core";

/** What a token is in a training row: the prompt, policy output (mask 1), or inserted observation (mask 0). */
export type TokenRole = "prompt" | "response" | "observation";

export interface TokenCell {
  index: number;
  id: number;
  role: TokenRole;
  /** The response mask value (null for prompt tokens). */
  mask: 0 | 1 | null;
  logprob: number | null;
}

/** A trajectory row token by token: prompt ids, then response ids with their observation mask. */
export function sequenceTokens(seq: TrajectorySequence): TokenCell[] {
  const cells: TokenCell[] = seq.prompt_token_ids.map((id, index) => ({
    index,
    id,
    role: "prompt",
    mask: null,
    logprob: null,
  }));
  const base = cells.length;
  seq.response_token_ids.forEach((id, i) => {
    const mask = seq.response_mask[i] === 0 ? 0 : 1;
    cells.push({
      index: base + i,
      id,
      role: mask === 1 ? "response" : "observation",
      mask,
      logprob: mask === 1 && seq.response_logprobs ? (seq.response_logprobs[i] ?? null) : null,
    });
  });
  return cells;
}

function idsOf(side: unknown): number[] {
  const ids = (side as { token_ids?: unknown } | null)?.token_ids;
  return Array.isArray(ids) ? ids.filter((x): x is number => typeof x === "number") : [];
}

/** One triplet token by token: its prompt ids, then its response ids (all generated, mask 1). */
export function tripletTokens(triplet: Triplet): TokenCell[] {
  const prompt = idsOf(triplet.prompt);
  const response = idsOf(triplet.response);
  const lp = (triplet.response as { logprobs?: unknown } | null)?.logprobs;
  const logprobs = Array.isArray(lp) && lp.length === response.length ? (lp as number[]) : null;
  return [
    ...prompt.map((id, index): TokenCell => ({ index, id, role: "prompt", mask: null, logprob: null })),
    ...response.map(
      (id, i): TokenCell => ({
        index: prompt.length + i,
        id,
        role: "response",
        mask: 1,
        logprob: logprobs ? (logprobs[i] ?? null) : null,
      }),
    ),
  ];
}

/** Counts per role, for the row headers ("12 prompt · 30 generated · 8 observation"). */
export function countRoles(cells: readonly TokenCell[]): Record<TokenRole, number> {
  const out: Record<TokenRole, number> = { prompt: 0, response: 0, observation: 0 };
  for (const c of cells) out[c.role]++;
  return out;
}
