/**
 * The pydantic models of Python Agent Lightning v0.3's store server, as zod schemas written from its
 * wire contract (types/core.py, types/tracer.py, types/resources.py and the request models of
 * store/client_server.py). Independent of @agl/core's schemas on purpose: this is the other side.
 *
 * Pydantic v2 rules mirrored here: a field without a default is required even when it may be null
 * (`Optional[str]` with no default: the key must be present); unknown keys are dropped
 * (`extra="ignore"`, the default) except on the span models, which keep them (`extra="allow"`);
 * `str` fields do not accept numbers; `Literal` fields accept only their values.
 */
import { z } from "zod";

const Float = z.number();
const OptFloat = Float.nullable();
const Dict = z.record(z.string(), z.any());

export const RolloutStatus = z.enum([
  "queuing",
  "preparing",
  "running",
  "failed",
  "succeeded",
  "cancelled",
  "requeuing",
]);
export const AttemptStatus = z.enum([
  "preparing",
  "running",
  "failed",
  "succeeded",
  "unresponsive",
  "timeout",
]);
export const WorkerStatus = z.enum(["idle", "busy", "unknown"]);
export const RolloutMode = z.enum(["train", "val", "test"]);

export const RolloutConfig = z.object({
  timeout_seconds: OptFloat.default(null),
  unresponsive_seconds: OptFloat.default(null),
  max_attempts: z.number().int().min(1).default(1),
  retry_condition: z.array(AttemptStatus).default([]),
});

export const Attempt = z.object({
  rollout_id: z.string(),
  attempt_id: z.string(),
  sequence_id: z.number().int(),
  start_time: Float,
  end_time: OptFloat.default(null),
  status: AttemptStatus.default("preparing"),
  worker_id: z.string().nullable().default(null),
  last_heartbeat_time: OptFloat.default(null),
  metadata: Dict.nullable().default(null),
});

export const Rollout = z.object({
  rollout_id: z.string(),
  input: z.any(),
  start_time: Float,
  end_time: OptFloat.default(null),
  mode: RolloutMode.nullable().default(null),
  resources_id: z.string().nullable().default(null),
  status: RolloutStatus.default("queuing"),
  config: RolloutConfig.default(RolloutConfig.parse({})),
  metadata: Dict.nullable().default(null),
});

export const AttemptedRollout = Rollout.extend({ attempt: Attempt });

export const Worker = z.object({
  worker_id: z.string(),
  status: WorkerStatus.default("unknown"),
  heartbeat_stats: Dict.nullable().default(null),
  last_heartbeat_time: OptFloat.default(null),
  last_dequeue_time: OptFloat.default(null),
  last_busy_time: OptFloat.default(null),
  last_idle_time: OptFloat.default(null),
  current_rollout_id: z.string().nullable().default(null),
  current_attempt_id: z.string().nullable().default(null),
});

// --- resources: a union discriminated by resource_type
const LLMFields = {
  endpoint: z.string(),
  model: z.string(),
  api_key: z.string().nullable().default(null),
  sampling_parameters: Dict.default({}),
};
export const Resource = z.discriminatedUnion("resource_type", [
  z.object({ resource_type: z.literal("llm"), ...LLMFields }),
  z.object({ resource_type: z.literal("proxy_llm"), ...LLMFields }),
  z.object({
    resource_type: z.literal("prompt_template"),
    template: z.string(),
    engine: z.enum(["jinja", "f-string", "poml"]),
  }),
]);
export const NamedResources = z.record(z.string(), Resource);
export const ResourcesUpdate = z.object({
  resources_id: z.string(),
  create_time: Float,
  update_time: Float,
  version: z.number().int(),
  resources: NamedResources,
});

// --- spans (extra keys allowed and echoed)
const AttributeValue = z.union([
  z.string(),
  z.boolean(),
  z.number(),
  z.array(z.string()),
  z.array(z.boolean()),
  z.array(z.number()),
]);
const Attributes = z.record(z.string(), AttributeValue);
const SpanContext = z.looseObject({
  trace_id: z.string(),
  span_id: z.string(),
  is_remote: z.boolean(),
  trace_state: z.record(z.string(), z.string()),
});
const TraceStatus = z.looseObject({
  status_code: z.enum(["UNSET", "OK", "ERROR"]),
  description: z.string().nullable().default(null),
});
const Event = z.looseObject({ name: z.string(), attributes: Attributes, timestamp: OptFloat.default(null) });
const Link = z.looseObject({ context: SpanContext, attributes: Attributes.nullable().default(null) });
const OtelResource = z.object({ attributes: Attributes, schema_url: z.string() });
export const Span = z.looseObject({
  rollout_id: z.string(),
  attempt_id: z.string(),
  sequence_id: z.number().int(),
  trace_id: z.string(),
  span_id: z.string(),
  parent_id: z.string().nullable(),
  name: z.string(),
  status: TraceStatus,
  attributes: Attributes,
  events: z.array(Event),
  links: z.array(Link),
  start_time: OptFloat,
  end_time: OptFloat,
  context: SpanContext.nullable(),
  parent: SpanContext.nullable(),
  resource: OtelResource,
});

export function paginated<T extends z.ZodType>(item: T) {
  return z.object({
    items: z.array(item),
    limit: z.number().int(),
    offset: z.number().int(),
    total: z.number().int(),
  });
}

// --- request bodies (store/client_server.py)
const Limit = z.number().int().default(-1);
const Offset = z.number().int().default(0);
const SortOrder = z.enum(["asc", "desc"]).default("asc");
const Logic = z.enum(["and", "or"]).default("and");

export const EnqueueRolloutRequest = z.object({
  input: z.any().refine((v) => v !== undefined, "Field required"),
  mode: RolloutMode.nullable().default(null),
  resources_id: z.string().nullable().default(null),
  config: RolloutConfig.nullable().default(null),
  metadata: Dict.nullable().default(null),
});
export const Requests = {
  enqueueMany: z.object({ rollouts: z.array(EnqueueRolloutRequest) }),
  dequeueMany: z.object({
    limit: z.number().int().default(1),
    worker_id: z.string().nullable().default(null),
  }),
  startRollout: EnqueueRolloutRequest.extend({ worker_id: z.string().nullable().default(null) }),
  startAttempt: z.object({ worker_id: z.string().nullable().default(null) }),
  queryRollouts: z.object({
    status_in: z.array(RolloutStatus).nullable().default(null),
    rollout_id_in: z.array(z.string()).nullable().default(null),
    rollout_id_contains: z.string().nullable().default(null),
    limit: Limit,
    offset: Offset,
    sort_by: z.string().nullable().default(null),
    sort_order: SortOrder,
    filter_logic: Logic,
  }),
  queryAttempts: z.object({
    limit: Limit,
    offset: Offset,
    sort_by: z.string().nullable().default("sequence_id"),
    sort_order: SortOrder,
  }),
  queryResources: z.object({
    resources_id: z.string().nullable().default(null),
    resources_id_contains: z.string().nullable().default(null),
    limit: Limit,
    offset: Offset,
    sort_by: z.string().nullable().default(null),
    sort_order: SortOrder,
  }),
  querySpans: z.object({
    rollout_id: z.string(),
    attempt_id: z.string().nullable().default(null),
    trace_id: z.string().nullable().default(null),
    trace_id_contains: z.string().nullable().default(null),
    span_id: z.string().nullable().default(null),
    span_id_contains: z.string().nullable().default(null),
    parent_id: z.string().nullable().default(null),
    parent_id_contains: z.string().nullable().default(null),
    name: z.string().nullable().default(null),
    name_contains: z.string().nullable().default(null),
    filter_logic: Logic,
    limit: Limit,
    offset: Offset,
    sort_by: z.string().nullable().default("sequence_id"),
    sort_order: SortOrder,
  }),
  queryWorkers: z.object({
    status_in: z.array(WorkerStatus).nullable().default(null),
    worker_id_contains: z.string().nullable().default(null),
    limit: Limit,
    offset: Offset,
    sort_by: z.string().nullable().default(null),
    sort_order: SortOrder,
    filter_logic: Logic,
  }),
  waitForRollouts: z.object({ rollout_ids: z.array(z.string()), timeout: OptFloat.default(null) }),
  nextSequenceId: z.object({ rollout_id: z.string(), attempt_id: z.string() }),
  updateRollout: z.object({
    input: z.any().optional(),
    mode: RolloutMode.nullable().optional(),
    resources_id: z.string().nullable().optional(),
    status: RolloutStatus.nullable().optional(),
    config: RolloutConfig.nullable().optional(),
    metadata: Dict.nullable().optional(),
  }),
  updateAttempt: z.object({
    status: AttemptStatus.nullable().optional(),
    worker_id: z.string().nullable().optional(),
    last_heartbeat_time: OptFloat.optional(),
    metadata: Dict.nullable().optional(),
  }),
  updateWorker: z.object({ heartbeat_stats: Dict.nullable().optional() }),
};

/** Model fields a `sort_by` may name (pydantic `model_fields`). */
export function fieldsOf(schema: z.ZodObject): string[] {
  return Object.keys(schema.shape);
}
