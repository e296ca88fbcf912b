import type {
  AttemptQuery,
  FilterLogic,
  PageOptions,
  ResourcesQuery,
  RolloutQuery,
  SortOrder,
  SpanQuery,
  WorkerQuery,
} from "@agl/core";
import {
  AttemptSchema,
  bodyNestsTooDeep,
  MAX_BODY_NESTING_DEPTH,
  MAX_IDS_PER_CALL,
  MAX_STORED_INT,
  ResourcesUpdateSchema,
  RolloutModeSchema,
  RolloutSchema,
  RolloutStatusSchema,
  SpanSchema,
  StorableStringSchema,
  WorkerSchema,
  WorkerStatusSchema,
} from "@agl/core";
import type { Context } from "hono";
import { z } from "zod";
import { bodyTooDeep } from "./body.js";
import { badRequest, parseRequest, RequestValidationError } from "./errors.js";

type Raw = Record<string, unknown>;

/**
 * The parameters of a query route, read from the query string for GET (repeated keys become lists)
 * or from the JSON body for POST `.../search`, so both forms go through the same validation.
 */
export async function readQueryParams(c: Context, listKeys: ReadonlyArray<string>): Promise<Raw> {
  if (c.req.method === "GET") {
    const out: Raw = {};
    const all = c.req.queries();
    for (const [key, values] of Object.entries(all)) {
      out[key] = listKeys.includes(key) ? values : values[values.length - 1];
    }
    return out;
  }
  const body = await readJsonBody(c, {});
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new RequestValidationError("", "the search body must be a JSON object");
  }
  const out: Raw = {};
  for (const [key, value] of Object.entries(body as Raw)) {
    // Python clients omit nulls, others send them: both mean "not given" for a query.
    if (value === null) continue;
    out[key] = listKeys.includes(key) && typeof value === "string" ? [value] : value;
  }
  return out;
}

/**
 * The JSON body, or `empty` when there is none. A body that is not JSON, or nests deeper than
 * MAX_BODY_NESTING_DEPTH, is a 422; the depth is checked before parsing (parsing a deep body is what
 * costs the memory).
 */
export async function readJsonBody(c: Context, empty: unknown): Promise<unknown> {
  // On node the bytes were scanned as they arrived (body.ts); bodies from app.request/app.fetch here.
  return parseJsonBody(await c.req.text(), empty, bodyTooDeep(c));
}

/**
 * A request body's text as JSON (`empty` when blank); `tooDeep` is the verdict of a scan of its bytes
 * as they arrived, undefined when it was not scanned (then the text is scanned here).
 */
export function parseJsonBody(text: string, empty: unknown, tooDeep: boolean | undefined): unknown {
  if (tooDeep ?? bodyNestsTooDeep(text, MAX_BODY_NESTING_DEPTH)) {
    throw new RequestValidationError(
      "",
      `body nests arrays/objects deeper than ${MAX_BODY_NESTING_DEPTH} levels`,
    );
  }
  // A search for the first non-space character, not trim(): trimming a large body copies it.
  if (!/\S/.test(text)) return empty;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new RequestValidationError("", `body is not valid JSON: ${(error as Error).message}`);
  }
}

const intLike = z.preprocess(
  (v) => (typeof v === "string" && v.trim() !== "" ? Number(v) : v),
  z
    .number({ error: "must be an integer" })
    .int({ error: "must be an integer" })
    .max(MAX_STORED_INT)
    .min(-MAX_STORED_INT),
);
const Text = StorableStringSchema;

const PageSchema = z.object({
  limit: intLike.optional(),
  offset: intLike.optional(),
  sort_by: Text.optional(),
  sort_order: Text.optional(),
  filter_logic: Text.optional(),
});

function stringList(values?: readonly string[]) {
  return values ? z.array(z.enum(values as [string, ...string[]])) : z.array(Text).max(MAX_IDS_PER_CALL);
}

/** The reference's 400 guards on sort, paging and logic (type errors were 422 before this). */
function pageOptions<K extends string>(
  raw: z.output<typeof PageSchema>,
  sortFields: readonly string[],
): PageOptions<K> {
  const out: PageOptions<K> = {};
  if (raw.sort_by !== undefined) {
    if (!sortFields.includes(raw.sort_by)) {
      throw badRequest(
        "sort_by",
        `cannot sort by ${JSON.stringify(raw.sort_by)}; fields: ${sortFields.join(", ")}`,
      );
    }
    out.sortBy = raw.sort_by as K;
  }
  if (raw.sort_order !== undefined) {
    if (raw.sort_order !== "asc" && raw.sort_order !== "desc") {
      throw badRequest("sort_order", `must be "asc" or "desc", got ${JSON.stringify(raw.sort_order)}`);
    }
    out.sortOrder = raw.sort_order as SortOrder;
  }
  if (raw.limit !== undefined) {
    if (raw.limit === 0 || raw.limit < -1)
      throw badRequest("limit", `must be -1 (all) or positive, got ${raw.limit}`);
    out.limit = raw.limit;
  }
  if (raw.offset !== undefined) {
    if (raw.offset < 0) throw badRequest("offset", `must be >= 0, got ${raw.offset}`);
    out.offset = raw.offset;
  }
  return out;
}

function filterLogic(value: string | undefined): FilterLogic | undefined {
  if (value === undefined) return undefined;
  if (value !== "and" && value !== "or") {
    throw badRequest("filter_logic", `must be "and" or "or", got ${JSON.stringify(value)}`);
  }
  return value;
}

const fields = (schema: { shape: Record<string, unknown> }) => Object.keys(schema.shape);
export const ROLLOUT_SORT_FIELDS = fields(RolloutSchema);
export const ATTEMPT_SORT_FIELDS = fields(AttemptSchema);
export const SPAN_SORT_FIELDS = fields(SpanSchema);
export const WORKER_SORT_FIELDS = fields(WorkerSchema);
export const RESOURCES_SORT_FIELDS = fields(ResourcesUpdateSchema);

export const ROLLOUT_LIST_KEYS = [
  "status_in",
  "rollout_id_in",
  "status",
  "rollout_ids",
  "mode_in",
  "data_id_in",
];
const RolloutParams = PageSchema.extend({
  status_in: stringList(RolloutStatusSchema.options).optional(),
  rollout_id_in: stringList().optional(),
  rollout_id_contains: Text.optional(),
  // agl-ts extensions (not in Python Agent Lightning's server): mode and metadata.data_id filters.
  mode_in: stringList(RolloutModeSchema.options).optional(),
  data_id_in: stringList().optional(),
  data_id_contains: Text.optional(),
  // Deprecated v0.3 aliases of status_in / rollout_id_in.
  status: stringList(RolloutStatusSchema.options).optional(),
  rollout_ids: stringList().optional(),
});

export function rolloutQuery(raw: Raw): RolloutQuery {
  const p = parseRequest(RolloutParams, raw);
  const query: RolloutQuery = { ...pageOptions(p, ROLLOUT_SORT_FIELDS) };
  const statusIn = p.status_in ?? p.status;
  if (statusIn) query.statusIn = statusIn as RolloutQuery["statusIn"];
  const idIn = p.rollout_id_in ?? p.rollout_ids;
  if (idIn) query.rolloutIdIn = idIn;
  if (p.rollout_id_contains !== undefined) query.rolloutIdContains = p.rollout_id_contains;
  if (p.mode_in) query.modeIn = p.mode_in as RolloutQuery["modeIn"];
  if (p.data_id_in) query.dataIdIn = p.data_id_in;
  if (p.data_id_contains !== undefined) query.dataIdContains = p.data_id_contains;
  const logic = filterLogic(p.filter_logic);
  if (logic) query.filterLogic = logic;
  return query;
}

export function attemptQuery(raw: Raw): AttemptQuery {
  return pageOptions(parseRequest(PageSchema, raw), ATTEMPT_SORT_FIELDS);
}

export const WORKER_LIST_KEYS = ["status_in"];
const WorkerParams = PageSchema.extend({
  status_in: stringList(WorkerStatusSchema.options).optional(),
  worker_id_contains: Text.optional(),
});

export function workerQuery(raw: Raw): WorkerQuery {
  const p = parseRequest(WorkerParams, raw);
  const query: WorkerQuery = { ...pageOptions(p, WORKER_SORT_FIELDS) };
  if (p.status_in) query.statusIn = p.status_in as WorkerQuery["statusIn"];
  if (p.worker_id_contains !== undefined) query.workerIdContains = p.worker_id_contains;
  const logic = filterLogic(p.filter_logic);
  if (logic) query.filterLogic = logic;
  return query;
}

const ResourcesParams = PageSchema.extend({
  resources_id: Text.optional(),
  resources_id_contains: Text.optional(),
});

export function resourcesQuery(raw: Raw): ResourcesQuery {
  const p = parseRequest(ResourcesParams, raw);
  const query: ResourcesQuery = { ...pageOptions(p, RESOURCES_SORT_FIELDS) };
  if (p.resources_id !== undefined) query.resourcesId = p.resources_id;
  if (p.resources_id_contains !== undefined) query.resourcesIdContains = p.resources_id_contains;
  return query;
}

const SPAN_FILTERS = [
  ["trace_id", "traceId"],
  ["trace_id_contains", "traceIdContains"],
  ["span_id", "spanId"],
  ["span_id_contains", "spanIdContains"],
  ["parent_id", "parentId"],
  ["parent_id_contains", "parentIdContains"],
  ["name", "name"],
  ["name_contains", "nameContains"],
] as const;

const SpanParams = PageSchema.extend({
  rollout_id: z.string({ error: "rollout_id is required" }).pipe(Text),
  attempt_id: Text.optional(),
  ...Object.fromEntries(SPAN_FILTERS.map(([wire]) => [wire, Text.optional()])),
});

export function spanQuery(raw: Raw): { rolloutId: string; query: SpanQuery } {
  const p = parseRequest(SpanParams, raw) as unknown as z.output<typeof PageSchema> &
    Record<string, string | undefined>;
  const query: SpanQuery = { ...pageOptions(p, SPAN_SORT_FIELDS) };
  if (p.attempt_id !== undefined) query.attemptId = p.attempt_id;
  for (const [wire, key] of SPAN_FILTERS) {
    if (p[wire] !== undefined) (query as Record<string, unknown>)[key] = p[wire];
  }
  const logic = filterLogic(p.filter_logic);
  if (logic) query.filterLogic = logic;
  return { rolloutId: p.rollout_id as string, query };
}
