/**
 * Span writes and reads of InMemoryLightningStore. Functions over the engine, taking `enter` (the
 * store's closed check + watchdog tick) so that validation happens before the store is touched.
 */
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { SpansEvictedError } from "../../errors.js";
import { spanFromReadable } from "../../tracing/otel-span.js";
import { nowSeconds } from "../../types/ids.js";
import type { PaginatedResult } from "../../types/misc.js";
import type { Span, SpanInput } from "../../types/span.js";
import { parseOrThrow } from "../../types/validate.js";
import { copyData, OtelSpanSequenceIdSchema, ReadableSpanInputSchema, StoreIdSchema } from "../inputs.js";
import { queryItems } from "../query.js";
import { normalizeSpanQuery } from "../query-schemas.js";
import { parseSpanInput, parseSpanInputs } from "../span-sanitize.js";
import type { SpanQuery } from "../store.js";
import type { MemoryEngine } from "./engine.js";

type Enter = () => MemoryEngine;

// Spans are the hot write path (one per LLM call through the proxy): validate once (a complete span
// skips zod, see span-input.ts; text no backend can hold is sanitised, see span-sanitize.ts), copy once into the store, and return the validated value. That is
// built fresh from the caller's input, so it may share nested values with that input (the caller's own
// data) but never with what the store keeps.
export function addSpan(enter: Enter, span: SpanInput): Span | null {
  const parsed = parseSpanInput(span, "span");
  const engine = enter();
  const stored = engine.addSpan(copyData(parsed, "span"), nowSeconds());
  engine.enforceSpanLimits();
  return stored ? parsed : null;
}

export function addManySpans(enter: Enter, spans: SpanInput[]): Span[] {
  const parsed = parseSpanInputs(spans, "spans");
  const copies = copyData(parsed, "spans");
  const engine = enter();
  // Check every target first so that a bad span stores nothing.
  for (const s of parsed) engine.attempt(s.rollout_id, s.attempt_id);
  const now = nowSeconds();
  const stored: Span[] = [];
  for (let i = 0; i < copies.length; i++) {
    if (engine.addSpan(copies[i]!, now)) stored.push(parsed[i]!);
  }
  // Once per batch, so a batch is never cut by an eviction halfway through.
  engine.enforceSpanLimits();
  return stored;
}

export function addOtelSpan(
  enter: Enter,
  rolloutId: string,
  attemptId: string,
  span: ReadableSpan,
  sequenceId?: number,
): Span | null {
  const rid = parseOrThrow(StoreIdSchema, rolloutId, "rollout_id");
  const aid = parseOrThrow(StoreIdSchema, attemptId, "attempt_id");
  const readable = parseOrThrow(ReadableSpanInputSchema, span, "span");
  const seq = parseOrThrow(OtelSpanSequenceIdSchema, sequenceId, "sequence_id");
  const engine = enter();
  engine.attempt(rid, aid);
  const converted = spanFromReadable(readable, {
    rolloutId: rid,
    attemptId: aid,
    sequenceId: seq ?? engine.nextSequence(rid),
  });
  // Validated like every other span input, so memory keeps exactly what a database store keeps.
  const stored = engine.addSpan(copyData(parseSpanInput(converted, "span"), "span"), nowSeconds());
  // Copy before enforcing: eviction may drop the very span just stored.
  const out = stored ? copyData(stored) : null;
  engine.enforceSpanLimits();
  return out;
}

export function querySpans(enter: Enter, rolloutId: string, query: SpanQuery): PaginatedResult<Span> {
  const rid = parseOrThrow(StoreIdSchema, rolloutId, "rollout_id");
  const { filter, page, attemptId } = normalizeSpanQuery(query);
  const engine = enter();
  const aid = attemptId === "latest" ? (engine.latestAttempt(rid)?.attempt_id ?? null) : attemptId;
  if (attemptId === "latest" && aid === null)
    return { items: [], limit: page.limit, offset: page.offset, total: 0 };
  // An empty or partial answer would pass for a rollout that emitted nothing: fail loudly instead.
  const eviction = engine.eviction;
  if (eviction && (aid === null ? eviction.hasEvicted(rid) : eviction.isEvicted(rid, aid)))
    throw new SpansEvictedError(rid, aid);
  const must = aid === null ? [] : [{ field: "attempt_id" as const, op: "exact" as const, value: aid }];
  const result = queryItems(engine.spans.get(rid) ?? [], { ...filter, must }, page);
  return { ...result, items: result.items.map((s) => copyData(s)) };
}
