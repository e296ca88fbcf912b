/**
 * OTLP trace data (decoded protobuf or OTLP/JSON) → Agent Lightning spans. Both inputs are plain
 * objects; JSON may use lowerCamelCase or snake_case keys (the protobuf JSON mapping allows both)
 * and hex ids, protobuf gives bytes. Ids come from span attributes first, then resource attributes.
 */
import {
  type Attributes,
  type AttributeValue,
  InvalidArgumentError,
  MAX_NESTING_DEPTH,
  type SpanInput,
} from "@agl/core";

export const ROLLOUT_ID_KEY = "agentlightning.rollout_id";
export const ATTEMPT_ID_KEY = "agentlightning.attempt_id";
export const SEQUENCE_ID_KEY = "agentlightning.span_sequence_id";

type Obj = Record<string, unknown>;

/** A converted span still missing its sequence id when the exporter did not carry one. */
export interface PendingSpan {
  span: Omit<SpanInput, "sequence_id"> & { sequence_id?: number };
  rolloutId: string;
  attemptId: string;
}

/** Spans refused while converting (attribute values nested deeper than the input rules allow). */
export interface ConversionRefusal {
  reason: string;
  rolloutId: string | null;
  attemptId: string | null;
  spans: number;
}

export interface ConvertedRequest {
  spans: PendingSpan[];
  /** Spans without a rollout or attempt id (not stored). */
  dropped: number;
  refused: ConversionRefusal[];
}

const snake = (camel: string) => camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Read a field by its lowerCamelCase name or its proto snake_case name. */
function field(obj: unknown, camel: string): unknown {
  if (typeof obj !== "object" || obj === null) return undefined;
  const o = obj as Obj;
  return o[camel] !== undefined ? o[camel] : o[snake(camel)];
}

function list(obj: unknown, camel: string): unknown[] {
  const v = field(obj, camel);
  return Array.isArray(v) ? v : [];
}

/** Protobuf bytes → lowercase hex; JSON already carries hex (OTLP/JSON rule). Empty → "". */
export function idToHex(value: unknown): string {
  if (value instanceof Uint8Array) return Buffer.from(value).toString("hex");
  if (typeof value === "string") return value.toLowerCase();
  return "";
}

function toNumber(value: unknown): number | null {
  if (value === undefined || value === null || value === "") return null;
  if (typeof value === "number") return value;
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "string") {
    const n = Number(value);
    return Number.isFinite(n) ? n : null;
  }
  if (typeof value === "object" && typeof (value as { toNumber?: unknown }).toNumber === "function") {
    return (value as { toNumber(): number }).toNumber();
  }
  return null;
}

/** Unix nanoseconds (string, number or Long) → epoch seconds; 0/absent → null. */
function nanosToSeconds(value: unknown): number | null {
  if (typeof value === "string" && /^\d+$/.test(value)) {
    const ns = BigInt(value);
    if (ns === 0n) return null;
    return Number(ns / 1000n) / 1e6;
  }
  const n = toNumber(value);
  if (n === null || n === 0) return null;
  return n > 1e12 ? n / 1e9 : n;
}

/** OTLP AnyValue → JSON value (bytes → hex, kvlist → object, int64 → number). */
export function anyValueToJson(value: unknown, depth = 1): AttributeValue {
  if (typeof value !== "object" || value === null) return null;
  const str = field(value, "stringValue");
  if (str !== undefined) return String(str);
  const bool = field(value, "boolValue");
  if (bool !== undefined) return Boolean(bool);
  const int = field(value, "intValue");
  if (int !== undefined) return toNumber(int);
  const dbl = field(value, "doubleValue");
  if (dbl !== undefined) return toNumber(dbl);
  const arr = field(value, "arrayValue");
  if (arr !== undefined) return list(arr, "values").map((v) => anyValueToJson(v, checkDepth(depth + 1)));
  const kv = field(value, "kvlistValue");
  if (kv !== undefined) return keyValuesToObject(list(kv, "values"), checkDepth(depth + 1));
  const bytes = field(value, "bytesValue");
  if (bytes !== undefined) {
    if (bytes instanceof Uint8Array) return Buffer.from(bytes).toString("hex");
    // OTLP/JSON carries bytes values as base64.
    return typeof bytes === "string" ? Buffer.from(bytes, "base64").toString("hex") : null;
  }
  return null;
}

/** Attribute values nest as deep as the store accepts, and no deeper (a hostile depth must not overflow the stack). */
function checkDepth(depth: number): number {
  if (depth > MAX_NESTING_DEPTH) {
    throw new InvalidArgumentError("attributes", `must not nest deeper than ${MAX_NESTING_DEPTH} levels`);
  }
  return depth;
}

export function keyValuesToObject(kvs: unknown[], depth = 1): Attributes {
  const out: Attributes = {};
  for (const kv of kvs) {
    const key = field(kv, "key");
    if (typeof key === "string") out[key] = anyValueToJson(field(kv, "value"), depth);
  }
  return out;
}

function parseTraceState(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof value !== "string" || value === "") return out;
  for (const part of value.split(",")) {
    const eq = part.indexOf("=");
    if (eq > 0) out[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return out;
}

const STATUS_CODES = ["UNSET", "OK", "ERROR"] as const;

function statusCode(value: unknown): (typeof STATUS_CODES)[number] {
  if (typeof value === "number") return STATUS_CODES[value] ?? "UNSET";
  if (typeof value === "string") {
    const name = value.replace(/^STATUS_CODE_/, "");
    return (STATUS_CODES as readonly string[]).includes(name)
      ? (name as (typeof STATUS_CODES)[number])
      : "UNSET";
  }
  return "UNSET";
}

function idAttribute(
  spanAttrs: Attributes,
  resourceAttrs: Attributes,
  key: string,
): AttributeValue | undefined {
  const v = spanAttrs[key];
  if (v !== undefined && v !== null && v !== "") return v;
  const r = resourceAttrs[key];
  return r !== undefined && r !== null && r !== "" ? r : undefined;
}

function parseSequenceId(value: AttributeValue | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = typeof value === "number" ? value : typeof value === "string" ? Number(value) : Number.NaN;
  return Number.isInteger(n) ? n : undefined;
}

/** A string attribute read straight from OTLP KeyValues (for naming a span whose attributes failed). */
function rawStringAttribute(kvs: unknown[], key: string): string | null {
  for (const kv of kvs) {
    if (field(kv, "key") !== key) continue;
    const v = field(field(kv, "value"), "stringValue");
    return typeof v === "string" ? v : null;
  }
  return null;
}

type Converted<T> = { ok: true; value: T } | { ok: false; reason: string };

/** `convert()`, or why its input cannot be stored (attribute values nested too deep). */
function attempt<T>(convert: () => T, where: string): Converted<T> {
  try {
    return { ok: true, value: convert() };
  } catch (error) {
    if (!InvalidArgumentError.isInstance(error)) throw error;
    return { ok: false, reason: `${where}${error.field}: ${error.message}` };
  }
}

/**
 * Convert an ExportTraceServiceRequest (protobuf-decoded or JSON) into spans ready to store. A span
 * (or resource) whose attributes cannot be stored is refused alone; the rest of the request converts.
 */
export function convertTraceRequest(request: unknown): ConvertedRequest {
  const spans: PendingSpan[] = [];
  const refused: ConversionRefusal[] = [];
  let dropped = 0;
  for (const resourceSpans of list(request, "resourceSpans")) {
    const resource = field(resourceSpans, "resource");
    const rawResourceAttrs = list(resource, "attributes");
    const resourceAttrs = attempt(() => keyValuesToObject(rawResourceAttrs), "resource.");
    const schemaUrl = field(resourceSpans, "schemaUrl");
    for (const scopeSpans of list(resourceSpans, "scopeSpans")) {
      for (const raw of list(scopeSpans, "spans")) {
        const rawAttrs = list(raw, "attributes");
        const idOf = (key: string) =>
          rawStringAttribute(rawAttrs, key) ?? rawStringAttribute(rawResourceAttrs, key);
        const converted = resourceAttrs.ok
          ? attempt(() => convertSpan(raw, resourceAttrs.value, rawAttrs, schemaUrl), "")
          : resourceAttrs;
        if (!converted.ok) {
          const [rolloutId, attemptId] = [idOf(ROLLOUT_ID_KEY), idOf(ATTEMPT_ID_KEY)];
          refused.push({ reason: converted.reason, rolloutId, attemptId, spans: 1 });
        } else if (converted.value === null) dropped += 1;
        else spans.push(converted.value);
      }
    }
  }
  return { spans, dropped, refused };
}

/** One OTLP span → a pending span, or null when it names no rollout or attempt. */
function convertSpan(
  raw: unknown,
  resourceAttrs: Attributes,
  rawAttrs: unknown[],
  schemaUrl: unknown,
): PendingSpan | null {
  const attributes = keyValuesToObject(rawAttrs);
  const rolloutId = idAttribute(attributes, resourceAttrs, ROLLOUT_ID_KEY);
  const attemptId = idAttribute(attributes, resourceAttrs, ATTEMPT_ID_KEY);
  if (typeof rolloutId !== "string" || typeof attemptId !== "string") return null;
  const traceId = idToHex(field(raw, "traceId"));
  const spanId = idToHex(field(raw, "spanId"));
  const parentId = idToHex(field(raw, "parentSpanId"));
  const traceState = parseTraceState(field(raw, "traceState"));
  const status = field(raw, "status");
  const statusMessage = field(status, "message");
  const span: PendingSpan["span"] = {
    rollout_id: rolloutId,
    attempt_id: attemptId,
    trace_id: traceId,
    span_id: spanId,
    parent_id: parentId === "" ? null : parentId,
    name: String(field(raw, "name") ?? ""),
    status: {
      status_code: statusCode(field(status, "code")),
      description: typeof statusMessage === "string" && statusMessage !== "" ? statusMessage : null,
    },
    attributes,
    events: list(raw, "events").map((e) => ({
      name: String(field(e, "name") ?? ""),
      attributes: keyValuesToObject(list(e, "attributes")),
      timestamp: nanosToSeconds(field(e, "timeUnixNano")),
    })),
    links: list(raw, "links").map((l) => ({
      context: {
        trace_id: idToHex(field(l, "traceId")),
        span_id: idToHex(field(l, "spanId")),
        is_remote: false,
        trace_state: parseTraceState(field(l, "traceState")),
      },
      attributes: keyValuesToObject(list(l, "attributes")),
    })),
    start_time: nanosToSeconds(field(raw, "startTimeUnixNano")),
    end_time: nanosToSeconds(field(raw, "endTimeUnixNano")),
    context: { trace_id: traceId, span_id: spanId, is_remote: false, trace_state: traceState },
    parent: null,
    resource: { attributes: resourceAttrs, schema_url: typeof schemaUrl === "string" ? schemaUrl : "" },
  };
  const seq = parseSequenceId(idAttribute(attributes, resourceAttrs, SEQUENCE_ID_KEY));
  if (seq !== undefined) span.sequence_id = seq;
  return { span, rolloutId, attemptId };
}
