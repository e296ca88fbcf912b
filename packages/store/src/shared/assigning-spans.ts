/**
 * An optional store capability the OTLP route uses: storing spans of which some still need their
 * sequence id, handing those ids out in the same transaction as the insert (PostgreSQL: one statement
 * and one commit per export instead of an allocation committed before the insert).
 */
import { InvalidArgumentError, type Span, type SpanInput } from "@agl/core";

export interface SequenceAssigningStore {
  /**
   * addManySpans, except that span i gets the next sequence id of its rollout when `assign[i]` is
   * true (its own `sequence_id` is a placeholder, ignored). The result carries the ids given.
   */
  addManySpansAssigningSequences(spans: SpanInput[], assign: readonly boolean[]): Promise<Span[]>;
}

export function assignsSequences(store: object): store is SequenceAssigningStore {
  return typeof (store as Partial<SequenceAssigningStore>).addManySpansAssigningSequences === "function";
}

/** The flags must match the spans one to one. */
export function checkAssignFlags(spans: readonly unknown[], assign: readonly boolean[]): void {
  if (!Array.isArray(assign) || assign.length !== spans.length || assign.some((a) => typeof a !== "boolean"))
    throw new InvalidArgumentError("assign", `must be ${spans.length} booleans, one per span`);
}
