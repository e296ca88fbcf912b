/**
 * GET /v1/agl/openapi.json: the server's route table as an OpenAPI 3.1 document. Paths come from the
 * app's own registered routes (so a route added later is listed too); bodies and answers reference JSON
 * Schemas generated from the same zod schemas the routes validate with.
 */
import {
  AttemptedRolloutSchema,
  AttemptPatchSchema,
  AttemptSchema,
  EnqueueRolloutRequestSchema,
  NamedResourcesSchema,
  ResourcesUpdateSchema,
  RolloutPatchSchema,
  RolloutSchema,
  SpanSchema,
  StartRolloutRequestSchema,
  WorkerSchema,
  WorkerUpdateSchema,
} from "@agl/core";
import type { Hono } from "hono";
import { z } from "zod";

const SCHEMAS: Record<string, z.ZodType> = {
  Rollout: RolloutSchema,
  AttemptedRollout: AttemptedRolloutSchema,
  Attempt: AttemptSchema,
  AttemptPatch: AttemptPatchSchema,
  RolloutPatch: RolloutPatchSchema,
  EnqueueRolloutRequest: EnqueueRolloutRequestSchema,
  StartRolloutRequest: StartRolloutRequestSchema,
  NamedResources: NamedResourcesSchema,
  ResourcesUpdate: ResourcesUpdateSchema,
  Span: SpanSchema,
  Worker: WorkerSchema,
  WorkerUpdate: WorkerUpdateSchema,
};

/** What is known of an operation beyond its path: a summary and the schemas of its body and answer. */
const OPERATIONS: Record<string, { summary: string; body?: string; answer?: string; list?: boolean }> = {
  "GET /v1/agl/health": { summary: "Liveness (no token needed)" },
  "GET /v1/agl/statistics": { summary: "Store statistics" },
  "POST /v1/agl/queues/rollouts/enqueue": { summary: "Enqueue rollouts", answer: "Rollout", list: true },
  "POST /v1/agl/queues/rollouts/dequeue": {
    summary: "Claim queued rollouts",
    answer: "AttemptedRollout",
    list: true,
  },
  "POST /v1/agl/rollouts": {
    summary: "Start a rollout now",
    body: "StartRolloutRequest",
    answer: "AttemptedRollout",
  },
  "GET /v1/agl/rollouts": { summary: "Query rollouts" },
  "POST /v1/agl/rollouts/search": { summary: "Query rollouts (filters in the body)" },
  "GET /v1/agl/rollouts/{rid}": { summary: "One rollout, or null", answer: "Rollout" },
  "POST /v1/agl/rollouts/{rid}": { summary: "Update a rollout", body: "RolloutPatch", answer: "Rollout" },
  "POST /v1/agl/rollouts/{rid}/attempts": { summary: "Start a new attempt", answer: "AttemptedRollout" },
  "GET /v1/agl/rollouts/{rid}/attempts": { summary: "Query attempts of a rollout" },
  "GET /v1/agl/rollouts/{rid}/attempts/latest": { summary: "Latest attempt, or null", answer: "Attempt" },
  "POST /v1/agl/rollouts/{rid}/attempts/{aid}": {
    summary: "Update an attempt",
    body: "AttemptPatch",
    answer: "Attempt",
  },
  "POST /v1/agl/waits/rollouts": { summary: "Wait for rollouts to finish", answer: "Rollout", list: true },
  "POST /v1/agl/resources": {
    summary: "Add a resources version",
    body: "NamedResources",
    answer: "ResourcesUpdate",
  },
  "GET /v1/agl/resources/latest": { summary: "Latest resources, or null", answer: "ResourcesUpdate" },
  "GET /v1/agl/resources/{id}": { summary: "Resources by id, or null", answer: "ResourcesUpdate" },
  "POST /v1/agl/resources/{id}": {
    summary: "Create or update resources by id",
    body: "NamedResources",
    answer: "ResourcesUpdate",
  },
  "POST /v1/agl/spans": { summary: "Add a span", answer: "Span" },
  "POST /v1/agl/spans/batch": { summary: "Add spans", answer: "Span", list: true },
  "GET /v1/agl/spans": { summary: "Query spans" },
  "GET /v1/agl/workers/{wid}": { summary: "One worker, or null", answer: "Worker" },
  "POST /v1/agl/workers/{wid}": { summary: "Update a worker", body: "WorkerUpdate", answer: "Worker" },
  "POST /v1/traces": { summary: "OTLP/HTTP trace ingest (protobuf or JSON)" },
};

let components: Record<string, unknown> | undefined;

function componentSchemas(): Record<string, unknown> {
  components ??= Object.fromEntries(
    Object.entries(SCHEMAS).map(([name, schema]) => [
      name,
      z.toJSONSchema(schema, { io: "output", unrepresentable: "any", target: "draft-2020-12" }),
    ]),
  );
  return components;
}

/** The OpenAPI document of `app`'s routes, served at `path`. */
export function openApiDocument(app: Hono, version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of app.routes) {
    const method = route.method.toLowerCase();
    if (method === "all" || route.path.includes("*")) continue;
    const path = route.path.replace(/:(\w+)/g, "{$1}");
    const known = OPERATIONS[`${route.method} ${path}`];
    const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => ({
      name: m[1],
      in: "path",
      required: true,
      schema: { type: "string" },
    }));
    const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
    const answer = known?.answer
      ? { schema: known.list ? { type: "array", items: ref(known.answer) } : ref(known.answer) }
      : {};
    paths[path] ??= {};
    paths[path][method] = {
      summary: known?.summary ?? `${route.method} ${path}`,
      ...(params.length ? { parameters: params } : {}),
      ...(known?.body
        ? { requestBody: { content: { "application/json": { schema: ref(known.body) } } } }
        : {}),
      responses: {
        default: {
          description: "JSON answer; errors are {detail, error_type, field?}",
          content: { "application/json": answer },
        },
      },
    };
  }
  return {
    openapi: "3.1.0",
    info: { title: "Agent Lightning store server (agl-ts)", version },
    components: {
      schemas: componentSchemas(),
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
    },
    security: [{ bearer: [] }],
    paths,
  };
}
