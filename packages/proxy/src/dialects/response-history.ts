import type { LightningStore } from "@agl/core";
import type { ProxyLogger } from "../options.js";
import { type RestoredResponse, restoreFromSpan, spanOfItem, spanOfResponse } from "./response-state.js";

/** The attempt a conversation belongs to; null for unattributed calls (one shared, in-process scope). */
export interface ResponseScope {
  rolloutId: string;
  attemptId: string;
}

/** The store method that finds a response's span again. */
export type SpanLookup = Pick<LightningStore, "querySpans">;

/** The store could not be asked for a response's span: a 503, not a 400 (the id may well be valid). */
export class ResponseStateUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ResponseStateUnavailableError";
  }
}

export interface ResponseHistoryOptions {
  /** In-process cache budget, by the JSON size of what it holds (shared messages counted once). */
  maxBytes?: number;
  /** Where the spans are; null keeps responses in this process only (as long as the cache holds them). */
  store?: SpanLookup | null;
  /**
   * How long a well-formed id whose span is not in the store yet is looked for again: another replica
   * answers the client before its span write lands.
   */
  waitMs?: number;
  log?: ProxyLogger;
}

type Entry = { kind: "conversation"; value: unknown[] } | { kind: "item"; value: unknown };

/**
 * The conversations behind `previous_response_id` and the output items behind `item_reference` inputs,
 * per rollout attempt: an id only resolves for calls attributed to the attempt that created it, so one
 * attempt can never continue another's conversation. The store is the record (the span of the call that
 * answered, see response-state.ts), so a restarted proxy or another replica continues the conversation;
 * this process keeps the recent ones in an LRU cache bounded in bytes.
 */
export class ResponseHistory {
  private readonly entries = new Map<string, Entry>();
  /** Every object an entry holds, with its size and how many entries hold it (conversations share). */
  private readonly held = new Map<object, { bytes: number; refs: number }>();
  private total = 0;
  private readonly loading = new Map<string, Promise<RestoredResponse | null>>();
  private readonly maxBytes: number;
  private readonly store: SpanLookup | null;
  private readonly waitMs: number;

  constructor(private readonly options: ResponseHistoryOptions = {}) {
    this.maxBytes = options.maxBytes ?? 64 * 1024 * 1024;
    this.store = options.store ?? null;
    this.waitMs = options.waitMs ?? 3_000;
  }

  /** The chat messages of the conversation up to and including that response, or undefined. */
  async conversation(scope: ResponseScope | null, responseId: string): Promise<unknown[] | undefined> {
    const key = this.key(scope, responseId);
    const hit = this.touch(key);
    if (hit?.kind === "conversation") return hit.value;
    const spanId = spanOfResponse(responseId);
    if (spanId === null || scope === null) return undefined;
    const restored = await this.load(scope, spanId);
    return restored?.responseId === responseId ? restored.conversation : undefined;
  }

  /** A stored output item (message or function call), for an `item_reference` input. */
  async item(scope: ResponseScope | null, itemId: string): Promise<unknown> {
    const hit = this.touch(this.key(scope, itemId));
    if (hit?.kind === "item") return hit.value;
    const spanId = spanOfItem(itemId);
    if (spanId === null || scope === null) return undefined;
    const restored = await this.load(scope, spanId);
    return restored?.items.find(([id]) => id === itemId)?.[1];
  }

  /** Keep a response this process answered (its span carries the same for other processes). */
  remember(
    scope: ResponseScope | null,
    responseId: string,
    conversation: unknown[],
    items: Array<[string, unknown]>,
  ): void {
    for (const [id, item] of items) this.put(this.key(scope, id), { kind: "item", value: item });
    this.put(this.key(scope, responseId), { kind: "conversation", value: conversation });
  }

  get size(): number {
    return this.entries.size;
  }

  /** What the cache holds now, by its accounting (JSON size; arrays 8 bytes per element). */
  get bytes(): number {
    return this.total;
  }

  private key(scope: ResponseScope | null, id: string): string {
    return JSON.stringify(scope ? [scope.rolloutId, scope.attemptId, id] : [id]);
  }

  /** An entry, made the most recently used. */
  private touch(key: string): Entry | undefined {
    const e = this.entries.get(key);
    if (e) {
      this.entries.delete(key);
      this.entries.set(key, e);
    }
    return e;
  }

  private put(key: string, entry: Entry): void {
    const old = this.entries.get(key);
    if (old) this.drop(key, old);
    this.entries.set(key, entry);
    if (entry.kind === "conversation") {
      this.total += 8 * entry.value.length;
      for (const m of entry.value) this.retain(m);
    } else this.retain(entry.value);
    // the newest entry stays even alone over budget: the next call of its conversation needs it
    while (this.total > this.maxBytes && this.entries.size > 1) {
      const [oldestKey, oldest] = this.entries.entries().next().value as [string, Entry];
      this.drop(oldestKey, oldest);
    }
  }

  private drop(key: string, entry: Entry): void {
    this.entries.delete(key);
    if (entry.kind === "conversation") {
      this.total -= 8 * entry.value.length;
      for (const m of entry.value) this.release(m);
    } else this.release(entry.value);
  }

  private retain(value: unknown): void {
    if (value === null || typeof value !== "object") return;
    let h = this.held.get(value);
    if (!h) {
      h = { bytes: JSON.stringify(value)?.length ?? 0, refs: 0 };
      this.held.set(value, h);
      this.total += h.bytes;
    }
    h.refs++;
  }

  private release(value: unknown): void {
    if (value === null || typeof value !== "object") return;
    const h = this.held.get(value);
    if (!h) return;
    if (--h.refs === 0) {
      this.held.delete(value);
      this.total -= h.bytes;
    }
  }

  /** The response recorded in span `spanId` of the attempt, cached; concurrent lookups share one. */
  private load(scope: ResponseScope, spanId: string): Promise<RestoredResponse | null> {
    if (this.store === null) return Promise.resolve(null);
    const key = this.key(scope, spanId);
    let pending = this.loading.get(key);
    if (!pending) {
      pending = this.fetch(scope, spanId).finally(() => this.loading.delete(key));
      this.loading.set(key, pending);
    }
    return pending;
  }

  private async fetch(scope: ResponseScope, spanId: string): Promise<RestoredResponse | null> {
    const store = this.store!;
    const deadline = performance.now() + this.waitMs;
    for (let delay = 10; ; delay = Math.min(delay * 2, 250)) {
      let spans: Awaited<ReturnType<SpanLookup["querySpans"]>>["items"];
      try {
        const page = await store.querySpans(scope.rolloutId, {
          attemptId: scope.attemptId,
          spanId,
          limit: 1,
        });
        spans = page.items;
      } catch (error) {
        const message = `reading the response history of ${scope.rolloutId}/${scope.attemptId} failed: ${(error as Error).message}`;
        this.options.log?.error(message);
        throw new ResponseStateUnavailableError(message);
      }
      const span = spans.find((s) => s.span_id === spanId && s.attempt_id === scope.attemptId);
      if (span) {
        const restored = restoreFromSpan(span);
        if (restored) this.remember(scope, restored.responseId, restored.conversation, restored.items);
        return restored;
      }
      if (performance.now() + delay > deadline) return null;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
