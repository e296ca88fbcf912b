/**
 * Storing the spans of one OTLP export. Each span stands on its own: text no backend can hold is
 * sanitised (core's span-sanitize.ts), a span that still breaks the input rules (a bad rollout or
 * attempt id, an out-of-range sequence id, nesting too deep) or names an unknown rollout or attempt is
 * refused alone, and the rest of the request is stored. Every refusal is logged at warn with its reason
 * and the rollout/attempt ids, and reported back through OTLP's `partial_success`.
 */
import {
  InvalidArgumentError,
  invalidId,
  type LightningStore,
  MAX_SPAN_SEQUENCE_ID,
  NotFoundError,
  parseSpanInput,
  type Span,
  type SpanInput,
  wasSanitized,
} from "@agl/core";
import { assignsSequences } from "../../shared/assigning-spans.js";
import type { StoreServerLogger } from "../logging.js";
import type { PendingSpan } from "./convert.js";

/** Spans of one request refused for one reason and one (rollout, attempt). */
export interface Refusal {
  reason: string;
  rolloutId: string | null;
  attemptId: string | null;
  spans: number;
}

export interface StoreOutcome {
  refusals: Refusal[];
  /** Spans stored with sanitised text (`agl.sanitized = true`). */
  sanitized: number;
}

/** Ids in log lines and messages: bounded, whatever a client sent. */
const clip = (s: string) => (s.length > 128 ? `${s.slice(0, 128)}…` : s);

class Refusals {
  private readonly byKey = new Map<string, Refusal>();
  add(reason: string, rolloutId: string | null, attemptId: string | null, spans = 1): void {
    const key = JSON.stringify([reason, rolloutId, attemptId]);
    const entry = this.byKey.get(key);
    if (entry) entry.spans += spans;
    else this.byKey.set(key, { reason, rolloutId, attemptId, spans });
  }
  list(): Refusal[] {
    return [...this.byKey.values()];
  }
}

function idProblem(p: PendingSpan): string | null {
  const rid = invalidId(p.rolloutId);
  if (rid) return `rollout_id ${rid}`;
  const aid = invalidId(p.attemptId);
  if (aid) return `attempt_id ${aid}`;
  const seq = p.span.sequence_id;
  if (seq !== undefined && !(Number.isInteger(seq) && seq >= 0 && seq <= MAX_SPAN_SEQUENCE_ID)) {
    return `sequence_id must be an integer from 0 to ${MAX_SPAN_SEQUENCE_ID}`;
  }
  return null;
}

/**
 * Check each span, then store everything in one batch (missing sequence ids handed out on the way).
 * If a batch names an unknown rollout or attempt, store each (rollout, attempt) group on its own so one
 * bad group does not lose the others.
 */
export async function storeOtlpSpans(
  store: LightningStore,
  pending: PendingSpan[],
  refusedEarly: Refusal[],
): Promise<StoreOutcome> {
  const refusals = new Refusals();
  for (const r of refusedEarly) refusals.add(r.reason, r.rolloutId, r.attemptId, r.spans);
  const candidates = pending.filter((p) => {
    const problem = idProblem(p);
    if (problem) refusals.add(problem, clip(p.rolloutId), clip(p.attemptId));
    return problem === null;
  });
  if (candidates.length === 0) return { refusals: refusals.list(), sanitized: 0 };
  // The common case, one batch: the store validates (and sanitises) each span once.
  const stored = await storeBatch(store, candidates);
  if (stored) return { refusals: refusals.list(), sanitized: stored.filter(wasSanitized).length };
  // Something in the batch was refused: find out which spans, store the rest.
  const spans: Span[] = [];
  for (const p of candidates) {
    try {
      spans.push(parseSpanInput(p.span, "span"));
    } catch (error) {
      if (!InvalidArgumentError.isInstance(error)) throw error;
      refusals.add(`${error.field}: ${error.message}`, p.rolloutId, p.attemptId);
    }
  }
  const sanitized = spans.length > 0 ? await storeGroups(store, spans, refusals) : 0;
  return { refusals: refusals.list(), sanitized };
}

/**
 * All spans in one call; null when the store refused the batch for a span's content or target (the
 * caller then finds out which). Missing sequence ids are handed out by the insert itself where the
 * store can (SequenceAssigningStore), else reserved first; either way every span then has one.
 */
async function storeBatch(store: LightningStore, candidates: PendingSpan[]): Promise<Span[] | null> {
  const assign = candidates.map((p) => p.span.sequence_id === undefined);
  try {
    if (assignsSequences(store) && assign.some(Boolean)) {
      // Placeholders on copies: the per-span retry below must still see which ids are missing.
      const spans = candidates.map((p) => ({ ...p.span, sequence_id: p.span.sequence_id ?? 0 }) as SpanInput);
      return await store.addManySpansAssigningSequences(spans, assign);
    }
    await reserveMissing(store, candidates);
    return await store.addManySpans(candidates.map((p) => p.span as SpanInput));
  } catch (error) {
    if (!NotFoundError.isInstance(error) && !InvalidArgumentError.isInstance(error)) throw error;
    await reserveMissing(store, candidates);
    return null;
  }
}

/** Give the spans without a sequence id theirs, reserved in one call. */
async function reserveMissing(store: LightningStore, candidates: PendingSpan[]): Promise<void> {
  const missing = candidates.filter((p) => p.span.sequence_id === undefined);
  if (missing.length === 0) return;
  const ids = await store.getManySpanSequenceIds(missing.map((p) => [p.rolloutId, p.attemptId] as const));
  missing.forEach((p, i) => {
    p.span.sequence_id = ids[i]!;
  });
}

/** Store each (rollout, attempt) group on its own; returns how many stored spans were sanitised. */
async function storeGroups(store: LightningStore, spans: Span[], refusals: Refusals): Promise<number> {
  const groups = new Map<string, SpanInput[]>();
  for (const span of spans) {
    const key = `${span.rollout_id}\u0000${span.attempt_id}`;
    const group = groups.get(key) ?? [];
    group.push(span);
    groups.set(key, group);
  }
  let sanitized = 0;
  for (const group of groups.values()) {
    try {
      sanitized += (await store.addManySpans(group)).filter(wasSanitized).length;
    } catch (error) {
      if (!NotFoundError.isInstance(error) && !InvalidArgumentError.isInstance(error)) throw error;
      const reason = NotFoundError.isInstance(error)
        ? `unknown rollout or attempt (${error.message})`
        : error.message;
      refusals.add(reason, group[0]!.rollout_id, group[0]!.attempt_id, group.length);
    }
  }
  return sanitized;
}

/** One warn line per refusal (reason, ids, how many spans). */
export function logRefusals(logger: StoreServerLogger, refusals: Refusal[], received: number): void {
  for (const r of refusals) {
    logger.warn("otlp spans refused", {
      reason: r.reason,
      rollout_id: r.rolloutId,
      attempt_id: r.attemptId,
      spans: r.spans,
      received,
    });
  }
}

/** Most distinct reasons an OTLP answer lists (the answer must stay small, per the OTLP spec). */
const MAX_REASONS_IN_MESSAGE = 5;

/** OTLP's `partial_success.error_message`: why spans were refused, or a note that text was sanitised. */
export function partialSuccessMessage(outcome: StoreOutcome): string {
  const rejected = outcome.refusals.reduce((n, r) => n + r.spans, 0);
  const parts: string[] = [];
  if (rejected > 0) {
    const reasons = [...new Set(outcome.refusals.map((r) => r.reason))];
    const shown = reasons.slice(0, MAX_REASONS_IN_MESSAGE).map((r) => clip(r));
    const more = reasons.length > shown.length ? `; and ${reasons.length - shown.length} more reason(s)` : "";
    parts.push(`${rejected} span(s) rejected: ${shown.join("; ")}${more}`);
  }
  if (outcome.sanitized > 0) {
    parts.push(
      `${outcome.sanitized} span(s) stored with U+0000 or lone surrogates replaced by U+FFFD (attribute agl.sanitized = true)`,
    );
  }
  return parts.join(". ");
}
