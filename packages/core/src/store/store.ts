import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import type { PaginatedResult, Worker, WorkerStatus } from "../types/misc.js";
import type { NamedResources, ResourcesUpdate } from "../types/resources.js";
import type {
  Attempt,
  AttemptedRollout,
  AttemptPatch,
  AttemptStatus,
  EnqueueRolloutRequest,
  Rollout,
  RolloutMode,
  RolloutPatch,
  RolloutStatus,
} from "../types/rollout.js";
import type { Span, SpanInput } from "../types/span.js";

export type FilterLogic = "and" | "or";
export type SortOrder = "asc" | "desc";

/** Paging and sorting shared by every query. `limit` -1 = all; 0 or < -1 is an error; `offset` >= 0. */
export interface PageOptions<SortKey extends string = string> {
  sortBy?: SortKey;
  sortOrder?: SortOrder;
  limit?: number;
  offset?: number;
}

export interface RolloutQuery extends PageOptions<keyof Rollout & string> {
  statusIn?: RolloutStatus[];
  rolloutIdIn?: string[];
  rolloutIdContains?: string;
  /**
   * agl-ts extensions (Python Agent Lightning's query has no such filters): the rollout's mode, and
   * its data id, the string `metadata.data_id` (exact list, or substring). A rollout without a string
   * `metadata.data_id` never matches a data-id filter.
   */
  modeIn?: RolloutMode[];
  dataIdIn?: string[];
  dataIdContains?: string;
  /** How the filters above combine. */
  filterLogic?: FilterLogic;
}

export interface AttemptQuery extends PageOptions<keyof Attempt & string> {}

export interface SpanQuery extends PageOptions<keyof Span & string> {
  /** An attempt id, "latest" (the highest-sequence attempt), or null/absent for all attempts. */
  attemptId?: string | "latest" | null;
  traceId?: string;
  traceIdContains?: string;
  spanId?: string;
  spanIdContains?: string;
  parentId?: string;
  parentIdContains?: string;
  name?: string;
  nameContains?: string;
  filterLogic?: FilterLogic;
}

export interface ResourcesQuery extends PageOptions<keyof ResourcesUpdate & string> {
  resourcesId?: string;
  resourcesIdContains?: string;
}

export interface WorkerQuery extends PageOptions<keyof Worker & string> {
  statusIn?: WorkerStatus[];
  workerIdContains?: string;
  filterLogic?: FilterLogic;
}

export interface WaitForRolloutsOptions {
  /** Seconds; <= 0 checks once, null/absent waits forever. */
  timeoutSeconds?: number | null;
  /** Cancels the wait: the call rejects with AbortedError and leaves no timer or listener behind. */
  signal?: AbortSignal;
}

export interface StartRolloutRequest extends EnqueueRolloutRequest {
  worker_id?: string | null;
}

export interface StoreCapabilities {
  thread_safe: boolean;
  async_safe: boolean;
  zero_copy: boolean;
  otlp_traces: boolean;
}

export interface StoreStatistics {
  name: string;
  total_rollouts: number;
  total_attempts: number;
  total_spans: number;
  total_resources: number;
  total_workers: number;
  uptime: number;
  [key: string]: unknown;
}

/**
 * The store every other part talks to (Agent Lightning v0.3 semantics, see docs/store.md).
 *
 * Errors: unknown ids on mutations throw NotFoundError; illegal status changes throw
 * IllegalTransitionError; bad arguments throw InvalidArgumentError. Getters return null on a miss.
 */
export interface LightningStore {
  readonly capabilities: StoreCapabilities;
  statistics(): Promise<StoreStatistics>;

  // --- rollouts and the queue
  /** Create a rollout and its first attempt directly in `preparing` (never queued). */
  startRollout(request: StartRolloutRequest): Promise<AttemptedRollout>;
  enqueueRollout(request: EnqueueRolloutRequest): Promise<Rollout>;
  enqueueManyRollouts(requests: EnqueueRolloutRequest[]): Promise<Rollout[]>;
  /** Non-blocking FIFO claim; null when nothing is queued. */
  dequeueRollout(options?: { workerId?: string | null }): Promise<AttemptedRollout | null>;
  /** Claim up to `limit` rollouts; a limit above MAX_DEQUEUE_LIMIT (1000) is clamped to it, <= 0 claims none. */
  dequeueManyRollouts(options: { limit: number; workerId?: string | null }): Promise<AttemptedRollout[]>;
  /** Manual retry: a new attempt from any state, ignoring max_attempts. */
  startAttempt(rolloutId: string, options?: { workerId?: string | null }): Promise<AttemptedRollout>;
  /** Items carry their latest attempt when they have one. */
  queryRollouts(query?: RolloutQuery): Promise<PaginatedResult<Rollout | AttemptedRollout>>;
  getRolloutById(rolloutId: string): Promise<Rollout | AttemptedRollout | null>;
  updateRollout(rolloutId: string, patch: RolloutPatch): Promise<Rollout>;
  /**
   * Resolve with the rollouts (of those given) that are terminal by the deadline; timeout in seconds,
   * null = forever. Aborting `signal` rejects the wait promptly with AbortedError (an already-aborted
   * signal rejects before anything is read) and releases its timers and listeners.
   */
  waitForRollouts(rolloutIds: string[], options?: WaitForRolloutsOptions): Promise<Rollout[]>;

  // --- attempts
  queryAttempts(rolloutId: string, query?: AttemptQuery): Promise<PaginatedResult<Attempt>>;
  getLatestAttempt(rolloutId: string): Promise<Attempt | null>;
  updateAttempt(rolloutId: string, attemptId: string | "latest", patch: AttemptPatch): Promise<Attempt>;

  // --- resources
  addResources(resources: NamedResources): Promise<ResourcesUpdate>;
  /** Upsert: a new id starts at version 1, an existing one is replaced with version + 1. Becomes the latest. */
  updateResources(resourcesId: string, resources: NamedResources): Promise<ResourcesUpdate>;
  getResourcesById(resourcesId: string): Promise<ResourcesUpdate | null>;
  getLatestResources(): Promise<ResourcesUpdate | null>;
  queryResources(query?: ResourcesQuery): Promise<PaginatedResult<ResourcesUpdate>>;

  // --- spans
  /** Store one span; null when (rollout_id, attempt_id, span_id) already exists. */
  addSpan(span: SpanInput): Promise<Span | null>;
  /** Store many spans; returns the ones stored (duplicates left out). */
  addManySpans(spans: SpanInput[]): Promise<Span[]>;
  /** Convert an OpenTelemetry span and store it, allocating a sequence id when none is given. */
  addOtelSpan(
    rolloutId: string,
    attemptId: string,
    span: ReadableSpan,
    sequenceId?: number,
  ): Promise<Span | null>;
  /** Per-rollout monotonic counter (1, 2, 3, ... across attempts). Ids are not validated. */
  getNextSpanSequenceId(rolloutId: string, attemptId: string): Promise<number>;
  getManySpanSequenceIds(
    pairs: ReadonlyArray<readonly [rolloutId: string, attemptId: string]>,
  ): Promise<number[]>;
  querySpans(rolloutId: string, query?: SpanQuery): Promise<PaginatedResult<Span>>;

  // --- workers
  queryWorkers(query?: WorkerQuery): Promise<PaginatedResult<Worker>>;
  getWorkerById(workerId: string): Promise<Worker | null>;
  /** Heartbeat: upsert the worker, set last_heartbeat_time = now, replace heartbeat_stats if given. */
  updateWorker(
    workerId: string,
    update?: { heartbeat_stats?: Record<string, unknown> | null },
  ): Promise<Worker>;

  /** Stop timers and release connections. Idempotent. */
  close(): Promise<void>;
}

export type { AttemptStatus };
