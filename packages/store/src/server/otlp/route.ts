import { promisify } from "node:util";
import { createGunzip, gzip } from "node:zlib";
import { bodyNestsTooDeep, type LightningStore, MAX_OTLP_JSON_NESTING_DEPTH } from "@agl/core";
import type { Context, Hono } from "hono";
import type { StoreServerLogger } from "../logging.js";
import { convertTraceRequest } from "./convert.js";
import { decodeTraceRequest, encodeRpcStatus, encodeTraceResponse } from "./proto.js";
import { logRefusals, partialSuccessMessage, type Refusal, storeOtlpSpans } from "./store-spans.js";

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

/**
 * OTLP/HTTP ingest: POST /v1/traces (protobuf or JSON, gzip both ways); metrics and logs are 501. A
 * span that cannot be stored is refused alone (`partial_success`, see store-spans.ts); only a body
 * that cannot be read at all is a 400/413.
 */
export function registerOtlpRoutes(app: Hono, store: LightningStore, options: OtlpOptions): void {
  app.post("/v1/traces", async (c) => {
    const format = formatOf(c.req.header("content-type"));
    if (!format) {
      options.logger.warn("otlp request refused", {
        reason: "unsupported content-type",
        content_type: c.req.header("content-type") ?? null,
      });
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
      options.logger.warn("otlp request refused", { reason: message });
      return replyStatus(c, format, error instanceof OtlpTooLargeError ? 413 : 400, message);
    }
    const { spans, dropped, refused } = converted;
    const early: Refusal[] = refused.map((r) => ({ ...r }));
    if (dropped > 0) {
      early.push({
        reason: "no agentlightning.rollout_id/attempt_id attribute on the span or its resource",
        rolloutId: null,
        attemptId: null,
        spans: dropped,
      });
    }
    const outcome = await storeOtlpSpans(store, spans, early);
    const rejected = outcome.refusals.reduce((n, r) => n + r.spans, 0);
    logRefusals(options.logger, outcome.refusals, spans.length + dropped + refused.length);
    const message = partialSuccessMessage(outcome);
    if (format === "json") {
      // OTLP/JSON: int64 as a decimal string; a zero count is omitted like any proto3 default.
      const partialSuccess = {
        ...(rejected > 0 ? { rejectedSpans: String(rejected) } : {}),
        ...(message !== "" ? { errorMessage: message } : {}),
      };
      const payload = message !== "" ? { partialSuccess } : {};
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
