/**
 * Small helpers shared by the conformance and model-based suites. Errors are recognised with the
 * classes' `isInstance` (marker symbols), never `instanceof`, so an HTTP client that rethrows typed
 * errors from another copy of the package passes too.
 */

import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base";
import { expect } from "vitest";
import type { LightningStore } from "../store/store.js";
import type { Attempt, AttemptedRollout, Rollout } from "../types/rollout.js";
import type { SpanInput } from "../types/span.js";

export type StoreFactory = () => Promise<{ store: LightningStore; cleanup?: () => Promise<void> }>;

interface ErrorClass {
  readonly name: string;
  isInstance(error: unknown): boolean;
}

/** Await `promise`, expect it to reject with an error of `cls`, and return that error. */
export async function expectError<E = any>(promise: Promise<unknown>, cls: ErrorClass): Promise<E> {
  let caught: unknown;
  let resolved = false;
  try {
    await promise;
    resolved = true;
  } catch (error) {
    caught = error;
  }
  if (resolved) throw new Error(`expected a ${cls.name}, but the call succeeded`);
  if (!cls.isInstance(caught)) {
    throw new Error(`expected a ${cls.name}, got ${String((caught as Error)?.name)}: ${String(caught)}`);
  }
  return caught as E;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Resolves once `condition` holds, polling every `intervalMs`: tests wait for the state they need instead
 * of a time, so a loaded machine makes them slower, never wrong (the test's timeout is the safety net).
 */
export async function until(condition: () => boolean | Promise<boolean>, intervalMs = 5): Promise<void> {
  while (!(await condition())) await sleep(intervalMs);
}

/** Run `fn` against a fresh store, always closing it and running cleanup. */
export async function withStore(
  factory: StoreFactory,
  fn: (store: LightningStore) => Promise<void>,
): Promise<void> {
  const { store, cleanup } = await factory();
  try {
    await fn(store);
  } finally {
    await store.close();
    await cleanup?.();
  }
}

let spanCounter = 0;

/** A minimal valid span for `attempt`, with a fresh span id unless one is given. */
export function makeSpan(
  attempt: Pick<Attempt, "rollout_id" | "attempt_id">,
  sequenceId: number,
  extra: Partial<SpanInput> & Record<string, unknown> = {},
): SpanInput {
  spanCounter++;
  return {
    rollout_id: attempt.rollout_id,
    attempt_id: attempt.attempt_id,
    sequence_id: sequenceId,
    trace_id: "0af7651916cd43dd8448eb211c80319c",
    span_id: spanCounter.toString(16).padStart(16, "0"),
    parent_id: null,
    name: "test.span",
    attributes: {},
    start_time: Date.now() / 1000,
    end_time: Date.now() / 1000,
    ...extra,
  };
}

/** A finished OpenTelemetry SDK span (no exporter involved). */
export function makeReadableSpan(
  name = "otel.span",
  attributes: Record<string, string | number> = {},
): ReadableSpan {
  const provider = new BasicTracerProvider();
  const span = provider.getTracer("agl-conformance").startSpan(name, { attributes });
  span.addEvent("evt", { k: "v" });
  span.end();
  return span as unknown as ReadableSpan;
}

export function attemptOf(rollout: Rollout | AttemptedRollout | null | undefined): Attempt {
  expect(rollout).toBeTruthy();
  const attempt = (rollout as AttemptedRollout).attempt;
  expect(attempt).toBeTruthy();
  return attempt;
}

export const nowSec = (): number => Date.now() / 1000;
