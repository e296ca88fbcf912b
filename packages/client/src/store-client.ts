/**
 * LightningStoreClient: the LightningStore interface over HTTP (Agent Lightning v0.3 REST, §3.1).
 *
 * Differences from the Python client, on purpose: errors are typed and never hidden as null; batch
 * calls use one request (POST /spans/batch, /spans/next/batch; falling back to one request each on
 * servers without them); waitForRollouts long-polls in chunks instead of refusing timeouts > 0.1 s;
 * calls that create something (enqueue, start rollout/attempt, add resources) are not resent once
 * the server may have acted on them (`idempotent: false`, see http/transport.ts). Span writes are
 * resent: the store drops a (rollout, attempt, span_id) it already has.
 */
import {
  type Attempt,
  type AttemptedRollout,
  AttemptedRolloutSchema,
  type AttemptPatch,
  type AttemptQuery,
  AttemptSchema,
  type EnqueueRolloutRequest,
  InvalidArgumentError,
  type LightningStore,
  type NamedResources,
  type PaginatedResult,
  parseSpanInput,
  type ResourcesQuery,
  type ResourcesUpdate,
  ResourcesUpdateSchema,
  type Rollout,
  type RolloutPatch,
  type RolloutQuery,
  RolloutSchema,
  type Span,
  type SpanInput,
  type SpanQuery,
  type StartRolloutRequest,
  type StoreCapabilities,
  type StoreStatistics,
  spanFromReadable,
  type WaitForRolloutsOptions,
  type Worker,
  type WorkerQuery,
  WorkerSchema,
} from "@agl/core";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { StoreTransport, type TransportOptions } from "./http/transport.js";
import { AGL_SERVER_HEADER } from "./http/trusted.js";
import {
  AttemptedRolloutList,
  MaybeAttempt,
  MaybeResources,
  MaybeRollout,
  MaybeSpan,
  MaybeWorker,
  PaginatedAttempts,
  PaginatedResources,
  PaginatedRollouts,
  PaginatedSpans,
  PaginatedWorkers,
  RolloutList,
  SequenceIdAnswer,
  SequenceIdsAnswer,
  SpanList,
  StatisticsAnswer,
  trustedAttempt,
  trustedClaims,
  trustedSequenceIds,
  trustedSpans,
  wireQuery,
} from "./http/wire.js";
import { parseClientOptions } from "./options.js";
import { waitForRollouts } from "./rollout-waits.js";
import { enc, StoreCaller } from "./store-call.js";

export interface LightningStoreClientOptions extends TransportOptions {
  /** Longest single server-side wait asked for by waitForRollouts, in seconds. Default 10. */
  waitChunkSeconds?: number;
}

/** Which implementation of the store API answers (see `LightningStoreClient.serverInfo`). */
export interface StoreServerInfo {
  /** "agl-ts": an agl-ts store server; "agentlightning": no agl-ts marker, so Python Agent Lightning's
   * `agl store` (or another server of its v0.3 REST API). */
  kind: "agl-ts" | "agentlightning";
  /** The store's own name from GET /statistics (e.g. "SqliteLightningStore", "InMemoryLightningStore"). */
  storeName: string | null;
  /** One line for logs: which server, and what the client does differently for it. */
  description: string;
}

export class LightningStoreClient implements LightningStore {
  readonly capabilities: StoreCapabilities = {
    thread_safe: true,
    async_safe: true,
    zero_copy: false,
    otlp_traces: true,
  };
  readonly url: string;
  private readonly http: StoreTransport;
  private readonly waitChunkSeconds: number;
  /** Sends each call and validates its answer (store-call.ts). */
  private readonly caller: StoreCaller;

  constructor(options: LightningStoreClientOptions | string) {
    const opts = parseClientOptions(options);
    this.http = new StoreTransport(opts);
    this.url = this.http.root;
    this.caller = new StoreCaller(this.http);
    this.waitChunkSeconds = opts.waitChunkSeconds ?? 10;
  }

  /** Where OTLP exporters should send traces for this store. */
  otlpTracesEndpoint(): string {
    return `${this.url}/v1/traces`;
  }

  /** True when GET /v1/agl/health answers (with the client's health retries). */
  isHealthy(): Promise<boolean> {
    return this.http.isHealthy();
  }

  /**
   * Ask the server which implementation it is (one GET /statistics, which also checks the token).
   * Everything else works with either; against Python Agent Lightning the client sends spans one
   * request each (it has no batch routes), waits by polling until every id is finished (it does not
   * say when a wait ended early), and sees store errors as HTTP 500s (retried as its own client does).
   */
  async serverInfo(): Promise<StoreServerInfo> {
    let marker: string | null = null;
    const stats = await this.caller.call(StatisticsAnswer, "get", "statistics", {
      onResponse: (res) => {
        marker = res.header(AGL_SERVER_HEADER);
      },
    });
    const storeName = typeof stats.name === "string" ? stats.name : null;
    const store = storeName ? ` (${storeName})` : "";
    if (marker !== null) {
      return { kind: "agl-ts", storeName, description: `agl-ts store server${store}` };
    }
    return {
      kind: "agentlightning",
      storeName,
      description:
        `Agent Lightning store server${store}, not agl-ts: spans go one per request, ` +
        "waits poll until every rollout is finished, store errors arrive as HTTP 500",
    };
  }

  async statistics(): Promise<StoreStatistics> {
    return (await this.caller.call(StatisticsAnswer, "get", "statistics")) as StoreStatistics;
  }

  // --- rollouts and the queue
  startRollout(request: StartRolloutRequest): Promise<AttemptedRollout> {
    return this.caller.call(AttemptedRolloutSchema, "post", "rollouts", { json: request, idempotent: false });
  }

  async enqueueRollout(request: EnqueueRolloutRequest): Promise<Rollout> {
    const [rollout] = await this.enqueueManyRollouts([request]);
    return rollout!;
  }

  enqueueManyRollouts(requests: EnqueueRolloutRequest[]): Promise<Rollout[]> {
    return this.caller.call(RolloutList, "post", "queues/rollouts/enqueue", {
      json: { rollouts: requests },
      idempotent: false,
    });
  }

  async dequeueRollout(options: { workerId?: string | null } = {}): Promise<AttemptedRollout | null> {
    const [claimed] = await this.dequeueManyRollouts({ limit: 1, workerId: options.workerId ?? null });
    return claimed ?? null;
  }

  /** Never retried: a retry after a lost answer could claim rollouts nobody runs. */
  async dequeueManyRollouts(options: {
    limit: number;
    workerId?: string | null;
  }): Promise<AttemptedRollout[]> {
    if (options.limit <= 0) return [];
    return this.caller.call(
      AttemptedRolloutList,
      "post",
      "queues/rollouts/dequeue",
      { json: { limit: options.limit, worker_id: options.workerId ?? null }, retry: false },
      trustedClaims,
    );
  }

  startAttempt(rolloutId: string, options: { workerId?: string | null } = {}): Promise<AttemptedRollout> {
    return this.caller.call(
      AttemptedRolloutSchema,
      "post",
      () => `rollouts/${enc(rolloutId, "rollout_id")}/attempts`,
      {
        json: { worker_id: options.workerId ?? null },
        idempotent: false,
      },
    );
  }

  /**
   * `modeIn`, `dataIdIn` and `dataIdContains` are agl-ts extensions: a Python Agent Lightning server
   * ignores them, so an answer without the agl-ts marker to such a query is refused instead of
   * returning unfiltered rows as if they matched.
   */
  async queryRollouts(query?: RolloutQuery): Promise<PaginatedResult<Rollout | AttemptedRollout>> {
    const extension = (["modeIn", "dataIdIn", "dataIdContains"] as const).find((k) => query?.[k] != null);
    let fromAgl = false;
    const page = await this.caller.call(PaginatedRollouts, "post", "rollouts/search", {
      json: wireQuery(query),
      onResponse: (res) => {
        fromAgl = res.header(AGL_SERVER_HEADER) !== null;
      },
    });
    if (extension && !fromAgl) {
      throw new InvalidArgumentError(
        extension,
        "this filter is an agl-ts extension; the store server is not agl-ts and ignores it (see serverInfo())",
      );
    }
    return page;
  }

  getRolloutById(rolloutId: string): Promise<Rollout | AttemptedRollout | null> {
    return this.caller.call(MaybeRollout, "get", () => `rollouts/${enc(rolloutId, "rollout_id")}`);
  }

  updateRollout(rolloutId: string, patch: RolloutPatch): Promise<Rollout> {
    return this.caller.call(RolloutSchema, "post", () => `rollouts/${enc(rolloutId, "rollout_id")}`, {
      json: patch,
    });
  }

  /**
   * Long-poll: each request asks the server to wait up to `waitChunkSeconds` (the server may cap it
   * lower), until every id is terminal or the deadline passes. timeout null = no deadline. Aborting
   * `signal` drops the request in flight (the server then releases its wait) and rejects with
   * AbortedError.
   */
  waitForRollouts(rolloutIds: string[], options: WaitForRolloutsOptions = {}): Promise<Rollout[]> {
    return waitForRollouts(this.caller, rolloutIds, options, this.waitChunkSeconds);
  }

  // --- attempts
  queryAttempts(rolloutId: string, query?: AttemptQuery): Promise<PaginatedResult<Attempt>> {
    return this.caller.call(
      PaginatedAttempts,
      "post",
      () => `rollouts/${enc(rolloutId, "rollout_id")}/attempts/search`,
      {
        json: wireQuery(query),
      },
    );
  }

  getLatestAttempt(rolloutId: string): Promise<Attempt | null> {
    return this.caller.call(
      MaybeAttempt,
      "get",
      () => `rollouts/${enc(rolloutId, "rollout_id")}/attempts/latest`,
    );
  }

  updateAttempt(rolloutId: string, attemptId: string, patch: AttemptPatch): Promise<Attempt> {
    return this.caller.call(
      AttemptSchema,
      "post",
      () => `rollouts/${enc(rolloutId, "rollout_id")}/attempts/${enc(attemptId, "attempt_id")}`,
      { json: patch },
      trustedAttempt,
    );
  }

  // --- resources
  addResources(resources: NamedResources): Promise<ResourcesUpdate> {
    return this.caller.call(ResourcesUpdateSchema, "post", "resources", {
      json: resources,
      idempotent: false,
    });
  }

  updateResources(resourcesId: string, resources: NamedResources): Promise<ResourcesUpdate> {
    return this.caller.call(
      ResourcesUpdateSchema,
      "post",
      () => `resources/${enc(resourcesId, "resources_id")}`,
      {
        json: resources,
      },
    );
  }

  getResourcesById(resourcesId: string): Promise<ResourcesUpdate | null> {
    return this.caller.call(MaybeResources, "get", () => `resources/${enc(resourcesId, "resources_id")}`);
  }

  getLatestResources(): Promise<ResourcesUpdate | null> {
    return this.caller.call(MaybeResources, "get", "resources/latest");
  }

  queryResources(query?: ResourcesQuery): Promise<PaginatedResult<ResourcesUpdate>> {
    return this.caller.call(PaginatedResources, "get", "resources", {
      searchParams: wireQuery(query) as Record<string, string | number>,
    });
  }

  // --- spans
  /**
   * The span goes out complete (defaults filled: null parent/context, empty events, ...): Python Agent
   * Lightning's server requires every field of its Span model, nullable or not. This is also the
   * one-per-request fallback of addManySpans for servers without the batch route.
   */
  async addSpan(span: SpanInput): Promise<Span | null> {
    // Sanitised like every store does (span-sanitize.ts), so a server without that rule stores it too.
    return this.caller.call(MaybeSpan, "post", "spans", { json: parseSpanInput(span, "span") });
  }

  async addManySpans(spans: SpanInput[]): Promise<Span[]> {
    if (spans.length === 0) return [];
    const batched = await this.caller.batch(() =>
      this.caller.call(SpanList, "post", "spans/batch", { json: { spans } }, trustedSpans),
    );
    if (batched) return batched;
    const stored: Span[] = [];
    for (const span of spans) {
      const s = await this.addSpan(span);
      if (s) stored.push(s);
    }
    return stored;
  }

  async addOtelSpan(
    rolloutId: string,
    attemptId: string,
    span: ReadableSpan,
    sequenceId?: number,
  ): Promise<Span | null> {
    const seq = sequenceId ?? (await this.getNextSpanSequenceId(rolloutId, attemptId));
    return this.addSpan(spanFromReadable(span, { rolloutId, attemptId, sequenceId: seq }));
  }

  async getNextSpanSequenceId(rolloutId: string, attemptId: string): Promise<number> {
    const body = await this.caller.call(SequenceIdAnswer, "post", "spans/next", {
      json: { rollout_id: rolloutId, attempt_id: attemptId },
    });
    return body.sequence_id;
  }

  async getManySpanSequenceIds(pairs: ReadonlyArray<readonly [string, string]>): Promise<number[]> {
    if (pairs.length === 0) return [];
    const batched = await this.caller.batch(async () => {
      const body = await this.caller.call(
        SequenceIdsAnswer,
        "post",
        "spans/next/batch",
        {
          json: { pairs: pairs.map(([rollout_id, attempt_id]) => ({ rollout_id, attempt_id })) },
        },
        trustedSequenceIds,
      );
      return body.sequence_ids;
    });
    if (batched) return batched;
    const ids: number[] = [];
    for (const [rid, aid] of pairs) ids.push(await this.getNextSpanSequenceId(rid, aid));
    return ids;
  }

  querySpans(rolloutId: string, query?: SpanQuery): Promise<PaginatedResult<Span>> {
    return this.caller.call(PaginatedSpans, "post", "spans/search", {
      json: { ...wireQuery(query), rollout_id: rolloutId },
    });
  }

  // --- workers
  queryWorkers(query?: WorkerQuery): Promise<PaginatedResult<Worker>> {
    return this.caller.call(PaginatedWorkers, "post", "workers/search", { json: wireQuery(query) });
  }

  getWorkerById(workerId: string): Promise<Worker | null> {
    return this.caller.call(MaybeWorker, "get", () => `workers/${enc(workerId, "worker_id")}`);
  }

  updateWorker(
    workerId: string,
    update?: { heartbeat_stats?: Record<string, unknown> | null },
  ): Promise<Worker> {
    const body = update?.heartbeat_stats != null ? { heartbeat_stats: update.heartbeat_stats } : {};
    return this.caller.call(WorkerSchema, "post", () => `workers/${enc(workerId, "worker_id")}`, {
      json: body,
    });
  }

  async close(): Promise<void> {
    await this.caller.close();
  }
}
