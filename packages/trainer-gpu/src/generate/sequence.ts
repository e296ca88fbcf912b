import type { IncrementalDecoder } from "../tokenizer/text-tokenizer.js";
import type { FinishReason, GeneratedToken, GenerateRequest, GenerateResult } from "./request.js";

/** One running request of the `Generator` and the helpers that group and finish such sequences. */

export interface Seq {
  req: GenerateRequest;
  rng: () => number;
  maxTokens: number;
  stop: readonly string[];
  tokens: GeneratedToken[];
  /** Position of the next input token (= sequence length so far). */
  pos: number;
  lastToken: number;
  text: string;
  decoder: IncrementalDecoder;
  stoppedByString?: boolean;
  emitted: number;
  finish?: FinishReason;
  /** Requests of one group (the `n` choices of one HTTP request) are admitted together, on one version. */
  group: number;
  resolve: (r: GenerateResult) => void;
  reject: (e: unknown) => void;
}

/** `seqs` partitioned by the adapter they asked for (in first-seen order). */
export function byAdapter(seqs: readonly Seq[]): Array<{ adapter: string | null | undefined; seqs: Seq[] }> {
  const parts = new Map<string | null | undefined, Seq[]>();
  for (const s of seqs) {
    const part = parts.get(s.req.adapter);
    if (part) part.push(s);
    else parts.set(s.req.adapter, [s]);
  }
  return [...parts].map(([adapter, part]) => ({ adapter, seqs: part }));
}

/** The per-row adapter selection of `seqs`, or undefined when none asks for one (the model's default). */
export function adapterRows(seqs: readonly Seq[]): Array<string | null | undefined> | undefined {
  return seqs.some((s) => s.req.adapter !== undefined) ? seqs.map((s) => s.req.adapter) : undefined;
}

/** Earliest position of a stop string that ends in the text added after `before` (-1 when none). */
export function findStop(text: string, stops: readonly string[], before: number): number {
  let best = -1;
  for (const s of stops) {
    const at = text.indexOf(s, Math.max(0, before - s.length + 1));
    if (at >= 0 && (best < 0 || at < best)) best = at;
  }
  return best;
}
