import { randomInt } from "node:crypto";
import type { IncrementalDecoder } from "../tokenizer/text-tokenizer.js";
import { allowedNextIds, sampleAllowed } from "./prefix-choices.js";
import type { FinishReason, GeneratedToken, GenerateRequest, GenerateResult } from "./request.js";
import { createRng, sampleToken, topLogprobs } from "./sampling.js";
import type { SamplingDefaults } from "./sampling-defaults.js";

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
  /** Remove the listener on `req.signal` (called when the sequence settles or moves to another generator). */
  unwatch?: () => void;
}

/** A queued sequence for `req` (its sampler seeded from `req.seed`, else at random). */
export function newSeq(
  req: GenerateRequest,
  group: number,
  maxTokens: number,
  decoder: IncrementalDecoder,
  resolve: (r: GenerateResult) => void,
  reject: (e: unknown) => void,
): Seq {
  const seq: Seq = {
    req,
    rng: createRng(req.seed ?? randomInt(2 ** 31)),
    maxTokens,
    stop: (req.stop ?? []).filter((s) => s.length > 0),
    tokens: [],
    pos: req.promptIds.length,
    lastToken: -1,
    text: "",
    decoder,
    emitted: 0,
    group,
    // A long-lived signal (one per client session) must not keep a listener per finished request.
    resolve: (r) => {
      seq.unwatch?.();
      resolve(r);
    },
    reject: (e) => {
      seq.unwatch?.();
      reject(e);
    },
  };
  return seq;
}

/**
 * Mark `seq` aborted when its request's signal fires, then call `onAbort`; replaces the listener a previous
 * generator attached (a hand-off). The listener goes when the sequence settles.
 */
export function watchAbort(seq: Seq, onAbort: () => void): void {
  seq.unwatch?.();
  const signal = seq.req.signal;
  if (!signal) return;
  const listener = () => {
    if (!seq.finish) seq.finish = "abort";
    onAbort();
  };
  signal.addEventListener("abort", listener, { once: true });
  seq.unwatch = () => {
    signal.removeEventListener("abort", listener);
    seq.unwatch = undefined;
  };
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

/** The next token of `seq` sampled from `logits` (its request's parameters, else `defaults`). */
export function sampleNext(seq: Seq, logits: Float32Array, defaults: SamplingDefaults): GeneratedToken {
  const r = seq.req;
  const params = {
    temperature: r.temperature ?? defaults.temperature ?? 1,
    topP: r.topP ?? defaults.topP ?? 1,
    topK: r.topK ?? defaults.topK ?? 0,
  };
  const allowed = r.prefixChoices ? allowedNextIds(r.prefixChoices, seq.tokens) : null;
  const token: GeneratedToken = allowed
    ? sampleAllowed(logits, allowed, params, seq.rng)
    : sampleToken(logits, params, seq.rng);
  if (r.topLogprobs) token.topLogprobs = topLogprobs(logits, r.topLogprobs);
  return token;
}

/**
 * Append the sampled `token` to `seq` and decide whether it finished (a stop string, an eos id, its token
 * budget or the context); returns the text that became final (a suffix that could still grow into a stop
 * string is held back).
 */
export function appendToken(
  seq: Seq,
  token: GeneratedToken,
  eosIds: ReadonlySet<number>,
  contextLength: number,
): string {
  seq.tokens.push(token);
  seq.lastToken = token.id;
  seq.pos++;
  const before = seq.text.length;
  seq.text += seq.decoder.push(token.id);
  let release = seq.text.length;
  const hit = findStop(seq.text, seq.stop, before);
  if (hit >= 0) {
    seq.text = seq.text.slice(0, hit);
    seq.finish = "stop";
    seq.stoppedByString = true;
    release = seq.text.length;
  } else if (eosIds.has(token.id) && !seq.req.ignoreEos) {
    seq.finish = "stop";
  } else if (seq.tokens.length >= seq.maxTokens || seq.pos >= contextLength) {
    seq.finish = "length";
  } else if (seq.stop.length > 0) {
    // Hold back a suffix that could still grow into a stop string.
    for (const s of seq.stop) {
      for (let k = Math.min(s.length - 1, seq.text.length); k > 0; k--) {
        if (seq.text.endsWith(s.slice(0, k))) {
          release = Math.min(release, seq.text.length - k);
          break;
        }
      }
    }
  }
  const textDelta = seq.text.slice(seq.emitted, Math.max(seq.emitted, release));
  seq.emitted = Math.max(seq.emitted, release);
  return textDelta;
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

/** What to prefill for `seq`: its prompt, and what it generated so far when handed over from older weights. */
export function prefillIds(seq: Seq): readonly number[] {
  return seq.tokens.length ? [...seq.req.promptIds, ...seq.tokens.map((t) => t.id)] : seq.req.promptIds;
}

/** Split running (`active`) and queued sequences into those `take` selects and the rows that stay. */
export function partitionForHandOff(
  active: readonly Seq[],
  queue: readonly Seq[],
  take: (req: GenerateRequest) => boolean,
): { keepActive: number[]; taken: Seq[]; queue: Seq[] } {
  const keepActive: number[] = [];
  const taken: Seq[] = [];
  active.forEach((s, i) => {
    if (take(s.req)) taken.push(s);
    else keepActive.push(i);
  });
  taken.push(...queue.filter((s) => take(s.req)));
  return { keepActive, taken, queue: queue.filter((s) => !take(s.req)) };
}

/** Resolve a finished `seq` (produced by weights `version`), first releasing any text still held back. */
export function settle(seq: Seq, version: number): void {
  // A trailing incomplete character (generation cut inside a multi-byte sequence) is released as is.
  if (!seq.stoppedByString) seq.text += seq.decoder.flush();
  // Flush text held back for a stop string that never completed.
  if (seq.emitted < seq.text.length && seq.tokens.length > 0) {
    const textDelta = seq.text.slice(seq.emitted);
    seq.emitted = seq.text.length;
    seq.req.onToken?.({ textDelta, modelVersion: version });
  }
  seq.resolve({
    promptIds: [...seq.req.promptIds],
    tokenIds: seq.tokens.map((t) => t.id),
    tokens: seq.tokens,
    text: seq.text,
    finishReason: seq.finish ?? "stop",
    modelVersion: version,
  });
}
