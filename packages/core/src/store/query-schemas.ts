/**
 * Validation and normalisation of the five query objects of the LightningStore interface into a
 * store-neutral {@link FilterSpec} + {@link NormalizedPage}. In-memory stores run them with
 * `queryItems`; SQL stores translate the same spec to WHERE/ORDER BY/LIMIT so every store agrees.
 */
import { z } from "zod";
import { MAX_IDS_PER_CALL, StorableStringSchema, StoredIntSchema } from "../types/input-rules.js";
import type { WorkerStatus } from "../types/misc.js";
import { WorkerStatusSchema } from "../types/misc.js";
import type { ResourcesUpdate } from "../types/resources.js";
import type { Attempt, Rollout } from "../types/rollout.js";
import { RolloutModeSchema, RolloutStatusSchema } from "../types/rollout.js";
import type { Span } from "../types/span.js";
import { parseOrThrow } from "../types/validate.js";
import {
  ATTEMPT_FIELDS,
  conditions,
  contains,
  containsKey,
  exact,
  FilterLogicSchema,
  type FilterSpec,
  type NormalizedPage,
  normalizePageOptions,
  RESOURCES_FIELDS,
  ROLLOUT_FIELDS,
  SPAN_FIELDS,
  WORKER_FIELDS,
  within,
  withinKey,
} from "./query.js";
import type { AttemptQuery, ResourcesQuery, RolloutQuery, SpanQuery, WorkerQuery } from "./store.js";

const Page = {
  sortBy: z.string().min(1).nullish(),
  sortOrder: z.string().nullish(),
  limit: StoredIntSchema.nullish(),
  offset: StoredIntSchema.nullish(),
};
const Text = StorableStringSchema;

export const RolloutQuerySchema = z.object({
  ...Page,
  statusIn: z.array(RolloutStatusSchema).nullish(),
  rolloutIdIn: z.array(Text).max(MAX_IDS_PER_CALL).nullish(),
  rolloutIdContains: Text.nullish(),
  modeIn: z.array(RolloutModeSchema).nullish(),
  dataIdIn: z.array(Text).max(MAX_IDS_PER_CALL).nullish(),
  dataIdContains: Text.nullish(),
  filterLogic: FilterLogicSchema.nullish(),
});

/** Where a rollout's data id lives: the string `metadata.data_id` (as Agent Lightning's trainer writes it). */
export const ROLLOUT_DATA_ID_KEY = "data_id";

export const AttemptQuerySchema = z.object({ ...Page });

export const SpanQuerySchema = z.object({
  ...Page,
  attemptId: Text.min(1).nullish(),
  traceId: Text.nullish(),
  traceIdContains: Text.nullish(),
  spanId: Text.nullish(),
  spanIdContains: Text.nullish(),
  parentId: Text.nullish(),
  parentIdContains: Text.nullish(),
  name: Text.nullish(),
  nameContains: Text.nullish(),
  filterLogic: FilterLogicSchema.nullish(),
});

export const ResourcesQuerySchema = z.object({
  ...Page,
  resourcesId: Text.nullish(),
  resourcesIdContains: Text.nullish(),
});

export const WorkerQuerySchema = z.object({
  ...Page,
  statusIn: z.array(WorkerStatusSchema).nullish(),
  workerIdContains: Text.nullish(),
  filterLogic: FilterLogicSchema.nullish(),
});

export interface NormalizedQuery<T> {
  filter: FilterSpec<T>;
  page: NormalizedPage;
}

export function normalizeRolloutQuery(query: RolloutQuery | null | undefined): NormalizedQuery<Rollout> {
  const q = parseOrThrow(RolloutQuerySchema, query ?? {}, "");
  return {
    filter: {
      conditions: conditions<Rollout>(
        within<Rollout>("status", q.statusIn),
        within<Rollout>("rollout_id", q.rolloutIdIn),
        contains<Rollout>("rollout_id", q.rolloutIdContains),
        within<Rollout>("mode", q.modeIn),
        withinKey<Rollout>("metadata", ROLLOUT_DATA_ID_KEY, q.dataIdIn),
        containsKey<Rollout>("metadata", ROLLOUT_DATA_ID_KEY, q.dataIdContains),
      ),
      logic: q.filterLogic ?? "and",
    },
    page: normalizePageOptions(q, ROLLOUT_FIELDS),
  };
}

/** Attempts sort by sequence_id unless told otherwise. */
export function normalizeAttemptQuery(query: AttemptQuery | null | undefined): NormalizedQuery<Attempt> {
  const q = parseOrThrow(AttemptQuerySchema, query ?? {}, "");
  return { filter: {}, page: normalizePageOptions(q, ATTEMPT_FIELDS, "sequence_id") };
}

/**
 * Spans sort by sequence_id unless told otherwise. `attemptId` is returned separately because
 * "latest" must be resolved by the store; the resolved id goes into the `must` group.
 */
export function normalizeSpanQuery(
  query: SpanQuery | null | undefined,
): NormalizedQuery<Span> & { attemptId: string | null } {
  const q = parseOrThrow(SpanQuerySchema, query ?? {}, "");
  return {
    attemptId: q.attemptId ?? null,
    filter: {
      conditions: conditions<Span>(
        exact<Span>("trace_id", q.traceId),
        contains<Span>("trace_id", q.traceIdContains),
        exact<Span>("span_id", q.spanId),
        contains<Span>("span_id", q.spanIdContains),
        exact<Span>("parent_id", q.parentId),
        contains<Span>("parent_id", q.parentIdContains),
        exact<Span>("name", q.name),
        contains<Span>("name", q.nameContains),
      ),
      logic: q.filterLogic ?? "and",
    },
    page: normalizePageOptions(q, SPAN_FIELDS, "sequence_id"),
  };
}

export function normalizeResourcesQuery(
  query: ResourcesQuery | null | undefined,
): NormalizedQuery<ResourcesUpdate> {
  const q = parseOrThrow(ResourcesQuerySchema, query ?? {}, "");
  return {
    filter: {
      conditions: conditions<ResourcesUpdate>(
        exact<ResourcesUpdate>("resources_id", q.resourcesId),
        contains<ResourcesUpdate>("resources_id", q.resourcesIdContains),
      ),
      logic: "and",
    },
    page: normalizePageOptions(q, RESOURCES_FIELDS),
  };
}

export function normalizeWorkerQuery(query: WorkerQuery | null | undefined): NormalizedQuery<{
  worker_id: string;
  status: WorkerStatus;
}> {
  const q = parseOrThrow(WorkerQuerySchema, query ?? {}, "");
  type W = { worker_id: string; status: WorkerStatus };
  return {
    filter: {
      conditions: conditions<W>(
        within<W>("status", q.statusIn),
        contains<W>("worker_id", q.workerIdContains),
      ),
      logic: q.filterLogic ?? "and",
    },
    page: normalizePageOptions(q, WORKER_FIELDS),
  };
}
