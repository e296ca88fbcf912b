import { promisify } from "node:util";
import { createGunzip, gzip } from "node:zlib";
import {
  bodyNestsTooDeep,
  InvalidArgumentError,
  type LightningStore,
  MAX_OTLP_JSON_NESTING_DEPTH,
  NotFoundError,
  type SpanInput,
} from "@agl/core";
import type { Context, Hono } from "hono";
import type { StoreServerLogger } from "../logging.js";
import { convertTraceRequest, type PendingSpan } from "./convert.js";
import { decodeTraceRequest, encodeRpcStatus, encodeTraceResponse } from "./proto.js";

const gzipAsync = promisify(gzip);

export interface OtlpOptions {
  /**
   * Largest decompressed body accepted (a small gzip body can expand enormously): inflating stops as
   * soon as the output passes it, so no more than this is ever allocated per request.
   */
  maxDecompressedBytes: number;
  logger: StoreServerLogger;
}

type Format = "protobuf" | "json";

class OtlpRequestError extends Error {}
class OtlpTooLargeError extends OtlpRequestError {}

/** OTLP/HTTP ingest: POST /v1/traces (protobuf or JSON, gzip both ways); metrics and logs are 501. */
export function registerOtlpRoutes(app: Hono, store: LightningStore, options: OtlpOptions): void {
  app.post("/v1/traces", async (c) => {
    const format = formatOf(c.req.header("content-type"));
    if (!format) {
      return reply(
        c,
        "protobuf",
        400,
        encodeRpcStatus(3, "Content-Type must be application/x-protobuf or application/json"),
      );
    }
    let converted: ReturnType<typeof convertTraceRequest>;
    try {
      const body = await readBody(c, options.maxDecompressedBytes);
      const request =
        body.length === 0 ? {} : format === "protobuf" ? decodeTraceRequest(body) : parseOtlpJson(body);
      converted = convertTraceRequest(request);
    } catch (error) {
      const message = `Invalid OTLP ${format} payload: ${(error as Error).message}`;
      return replyStatus(c, format, error instanceof OtlpTooLargeError ? 413 : 400, message);
    }
    const { spans, dropped } = converted;
    let unknownTargets: number;
    try {
      unknownTargets = await storeSpans(store, spans, options.logger);
    } catch (error) {
      // A span the store's input rules reject (bad string, out-of-range sequence id...): the sender's fault.
      if (!InvalidArgumentError.isInstance(error)) throw error;
      return replyStatus(c, format, 400, `Invalid OTLP span: ${error.message}`);
    }
    const rejected = dropped + unknownTargets;
    if (rejected > 0) {
      options.logger.warn("otlp spans rejected", {
        received: spans.length + dropped,
        rejected,
        without_ids: dropped,
      });
    }
    const message =
      rejected > 0
        ? `${rejected} span(s) rejected: ${dropped} without agentlightning.rollout_id/attempt_id, ${rejected - dropped} for unknown rollouts or attempts`
        : "";
    if (format === "json") {
      const payload =
        rejected > 0 ? { partialSuccess: { rejectedSpans: String(rejected), errorMessage: message } } : {};
      return reply(c, "json", 200, Buffer.from(JSON.stringify(payload)));
    }
    return reply(c, "protobuf", 200, encodeTraceResponse(rejected, message));
  });

  const notImplemented = (c: Context) =>
    c.json({ detail: `${c.req.path} is not supported by this store`, error_type: "NotImplemented" }, 501);
  app.post("/v1/metrics", notImplemented);
  app.post("/v1/logs", notImplemented);
  app.post("/v1/development/profiles", notImplemented);
}

function formatOf(contentType: string | undefined): Format | null {
  const base = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  if (base === "application/x-protobuf" || base === "application/protobuf") return "protobuf";
  if (base === "application/json") return "json";
  return null;
}

async function readBody(c: Context, maxDecompressedBytes: number): Promise<Buffer> {
  const raw = Buffer.from(await c.req.arrayBuffer());
  const encoding = (c.req.header("content-encoding") ?? "identity").trim().toLowerCase();
  if (encoding === "identity" || encoding === "" || raw.length === 0) return raw;
  if (encoding !== "gzip") throw new OtlpRequestError(`unsupported Content-Encoding ${encoding}`);
  // Few inflations at once: each may hold up to the limit, and they run on libuv's small thread pool.
  while (inflating >= MAX_CONCURRENT_INFLATIONS) await new Promise<void>((r) => inflateQueue.push(r));
  inflating++;
  try {
    return await inflateBounded(raw, maxDecompressedBytes);
  } finally {
    inflating--;
    inflateQueue.shift()?.();
  }
}

const MAX_CONCURRENT_INFLATIONS = 2;
let inflating = 0;
const inflateQueue: Array<() => void> = [];

/** Gunzip `raw`, counting output as it is produced and stopping (destroying the inflater) past `max` bytes. */
function inflateBounded(raw: Buffer, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const inflater = createGunzip({ chunkSize: 64 * 1024 });
    const chunks: Buffer[] = [];
    let size = 0;
    inflater.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        chunks.length = 0;
        inflater.destroy();
        reject(new OtlpTooLargeError(`decompressed body larger than ${max} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    inflater.on("end", () => resolve(Buffer.concat(chunks, size)));
    inflater.on("error", (error) => reject(error));
    inflater.end(raw);
  });
}

/**
 * Allocate the missing sequence ids in one call, then store everything in one batch. If a batch
 * names an unknown rollout or attempt, store each (rollout, attempt) group on its own so one bad
 * group does not lose the others. Returns how many spans were rejected.
 */
async function storeSpans(
  store: LightningStore,
  pending: PendingSpan[],
  logger: StoreServerLogger,
): Promise<number> {
  if (pending.length === 0) return 0;
  const missing = pending.filter((p) => p.span.sequence_id === undefined);
  if (missing.length > 0) {
    const ids = await store.getManySpanSequenceIds(missing.map((p) => [p.rolloutId, p.attemptId] as const));
    missing.forEach((p, i) => {
      p.span.sequence_id = ids[i]!;
    });
  }
  const spans = pending.map((p) => p.span as SpanInput);
  try {
    await store.addManySpans(spans);
    return 0;
  } catch (error) {
    if (!NotFoundError.isInstance(error)) throw error;
  }
  const groups = new Map<string, SpanInput[]>();
  for (const span of spans) {
    const key = `${span.rollout_id}\u0000${span.attempt_id}`;
    const group = groups.get(key) ?? [];
    group.push(span);
    groups.set(key, group);
  }
  let rejected = 0;
  for (const group of groups.values()) {
    try {
      await store.addManySpans(group);
    } catch (error) {
      if (!NotFoundError.isInstance(error)) throw error;
      rejected += group.length;
      logger.warn("otlp spans for unknown rollout or attempt", {
        detail: error.message,
        spans: group.length,
      });
    }
  }
  return rejected;
}

function replyStatus(c: Context, format: Format, status: 400 | 413, message: string): Promise<Response> {
  if (format === "json") return reply(c, "json", status, Buffer.from(JSON.stringify({ code: 3, message })));
  return reply(c, "protobuf", status, encodeRpcStatus(3, message));
}

async function reply(
  c: Context,
  format: Format,
  status: 200 | 400 | 413,
  body: Uint8Array,
): Promise<Response> {
  const headers: Record<string, string> = {
    "content-type": format === "json" ? "application/json" : "application/x-protobuf",
  };
  let payload: Uint8Array = body;
  if (/\bgzip\b/i.test(c.req.header("accept-encoding") ?? "") && body.length > 0) {
    payload = await gzipAsync(body);
    headers["content-encoding"] = "gzip";
  }
  return new Response(payload as Uint8Array<ArrayBuffer>, { status, headers });
}

/** OTLP/JSON, refused before parsing when it nests deeper than any storable attribute could need. */
function parseOtlpJson(body: Buffer): unknown {
  if (bodyNestsTooDeep(body, MAX_OTLP_JSON_NESTING_DEPTH)) {
    throw new Error(`the JSON nests deeper than ${MAX_OTLP_JSON_NESTING_DEPTH} levels`);
  }
  return JSON.parse(body.toString("utf8"));
}
