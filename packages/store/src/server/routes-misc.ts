import {
  IdStringSchema,
  isCanonicalSpan,
  type LightningStore,
  MAX_IDS_PER_CALL,
  NamedResourcesSchema,
  SanitizingSpanSchema,
  type Span,
  StorableRecordSchema,
} from "@agl/core";
import type { Context, Hono } from "hono";
import { z } from "zod";
import { badRequest, parseRequest } from "./errors.js";
import { addSpan } from "./hot-handlers.js";
import {
  readJsonBody,
  readQueryParams,
  resourcesQuery,
  spanQuery,
  WORKER_LIST_KEYS,
  workerQuery,
} from "./params.js";
import { noteSpanTarget } from "./refusals.js";

const NextSeqBody = z.object({ rollout_id: IdStringSchema, attempt_id: IdStringSchema });
const NextSeqBatchBody = z.object({
  pairs: z.array(NextSeqBody).max(MAX_IDS_PER_CALL),
});
// Spans are sanitised before validation (core's span-sanitize.ts): text no backend can hold is stored
// as U+FFFD with the span marked `agl.sanitized`, not refused.
const SpanBatchBody = z.object({ spans: z.array(SanitizingSpanSchema) });
const WorkerUpdateBody = z.object({ heartbeat_stats: StorableRecordSchema.optional() });

/** The spans of a `{ spans: [...] }` body when every one is complete and valid, else undefined. */
function canonicalBatch(body: unknown): Span[] | undefined {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined;
  const spans = (body as { spans?: unknown }).spans;
  if (!Array.isArray(spans)) return undefined;
  // An index loop, not every(): a hole is undefined here and fails the check, as zod would refuse it.
  for (let i = 0; i < spans.length; i++) if (!isCanonicalSpan(spans[i])) return undefined;
  return spans as Span[];
}

/** Health, statistics, resources, spans and workers (mounted under /v1/agl). */
export function registerMiscRoutes(app: Hono, store: LightningStore): void {
  app.get("/health", (c) => c.json({ status: "ok" }));
  app.get("/statistics", async (c) => c.json(await store.statistics()));

  // --- resources
  app.get("/resources", async (c) =>
    c.json(await store.queryResources(resourcesQuery(await readQueryParams(c, [])))),
  );
  app.post("/resources", async (c) => {
    const resources = parseRequest(NamedResourcesSchema, await readJsonBody(c, undefined));
    return c.json(await store.addResources(resources), 201);
  });
  app.get("/resources/latest", async (c) => c.json(await store.getLatestResources()));
  app.get("/resources/:id", async (c) => c.json(await store.getResourcesById(c.req.param("id"))));
  app.post("/resources/:id", async (c) => {
    const resources = parseRequest(NamedResourcesSchema, await readJsonBody(c, undefined));
    return c.json(await store.updateResources(c.req.param("id"), resources));
  });

  // --- spans
  app.post("/spans", async (c) => {
    const body = await readJsonBody(c, undefined);
    noteSpanTarget(c, body);
    return c.json(await addSpan(store, body), 201);
  });
  // Extension: one request for a batch (the Python client sends N POST /spans instead).
  app.post("/spans/batch", async (c) => {
    const raw = await readJsonBody(c, undefined);
    noteSpanTarget(c, raw);
    // As POST /spans: a batch of complete, valid spans is what the schema would return unchanged.
    const spans = canonicalBatch(raw) ?? parseRequest(SpanBatchBody, raw).spans;
    return c.json(await store.addManySpans(spans), 201);
  });
  const searchSpans = async (c: Context) => {
    const { rolloutId, query } = spanQuery(await readQueryParams(c, []));
    return c.json(await store.querySpans(rolloutId, query));
  };
  app.get("/spans", searchSpans);
  app.post("/spans/search", searchSpans);
  app.post("/spans/next", async (c) => {
    const body = parseRequest(NextSeqBody, await readJsonBody(c, undefined));
    return c.json({ sequence_id: await store.getNextSpanSequenceId(body.rollout_id, body.attempt_id) });
  });
  // Extension: consecutive sequence ids for many (rollout, attempt) pairs in one request.
  app.post("/spans/next/batch", async (c) => {
    const body = parseRequest(NextSeqBatchBody, await readJsonBody(c, undefined));
    const ids = await store.getManySpanSequenceIds(
      body.pairs.map((p) => [p.rollout_id, p.attempt_id] as const),
    );
    return c.json({ sequence_ids: ids });
  });

  // --- workers
  const searchWorkers = async (c: Context) =>
    c.json(await store.queryWorkers(workerQuery(await readQueryParams(c, WORKER_LIST_KEYS))));
  app.get("/workers", searchWorkers);
  app.post("/workers/search", searchWorkers);
  app.get("/workers/:wid", async (c) => c.json(await store.getWorkerById(c.req.param("wid"))));
  app.post("/workers/:wid", async (c) => {
    const raw = await readJsonBody(c, {});
    if (typeof raw === "object" && raw !== null && "heartbeat_stats" in raw && raw.heartbeat_stats === null) {
      throw badRequest("heartbeat_stats", "cannot be null");
    }
    const body = parseRequest(WorkerUpdateBody, raw);
    const update = body.heartbeat_stats !== undefined ? { heartbeat_stats: body.heartbeat_stats } : undefined;
    return c.json(await store.updateWorker(c.req.param("wid"), update));
  });
}
