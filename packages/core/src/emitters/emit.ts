import { InvalidArgumentError } from "../errors.js";
import { ATTR, SPAN_NAMES } from "../tracing/conventions.js";
import { flattenAttributes, stringify } from "../tracing/flatten.js";
import type { SpanCoreFields } from "../types/span.js";
import { type EmitOptions, recordSpan } from "./record.js";

/** An `agentlightning.annotation` span with `annotation` flattened to dotted keys; leaves must be primitives. */
export function emitAnnotation(
  annotation: Record<string, unknown>,
  options: EmitOptions = {},
): SpanCoreFields {
  if (typeof annotation !== "object" || annotation === null || Array.isArray(annotation)) {
    throw new InvalidArgumentError("annotation", "must be an object of attributes");
  }
  return recordSpan(SPAN_NAMES.annotation, flattenAttributes(annotation, "", "reject"), options);
}

/** An `agentlightning.message` span carrying `agentlightning.message.body`. */
export function emitMessage(
  message: string,
  options: EmitOptions & { attributes?: Record<string, unknown> } = {},
): SpanCoreFields {
  if (typeof message !== "string") throw new InvalidArgumentError("message", "must be a string");
  return recordSpan(
    SPAN_NAMES.message,
    { ...flattenAttributes(options.attributes ?? {}, "", "stringify"), [ATTR.messageBody]: message },
    options,
  );
}

/**
 * An `agentlightning.object` span: strings, numbers and booleans as `.object.literal`, bytes as base64
 * literal, anything else as `.object.json`; `.object.type` names the kind.
 */
export function emitObject(
  value: unknown,
  options: EmitOptions & { attributes?: Record<string, unknown> } = {},
): SpanCoreFields {
  const attributes: Record<string, string | number | boolean> = flattenAttributes(
    options.attributes ?? {},
    "",
    "stringify",
  );
  if (
    typeof value === "string" ||
    typeof value === "boolean" ||
    (typeof value === "number" && Number.isFinite(value))
  ) {
    attributes[ATTR.objectType] = typeof value;
    attributes[ATTR.objectLiteral] = value;
  } else if (value instanceof Uint8Array) {
    attributes[ATTR.objectType] = "bytes";
    attributes[ATTR.objectLiteral] = Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString(
      "base64",
    );
  } else {
    attributes[ATTR.objectType] = value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
    attributes[ATTR.objectJson] = stringify(value);
  }
  return recordSpan(SPAN_NAMES.object, attributes, options);
}

/** An `agentlightning.exception` span with the OTel `exception.*` attributes and an `exception` event. */
export function emitException(error: unknown, options: EmitOptions = {}): SpanCoreFields {
  const err =
    error instanceof Error ? error : new Error(typeof error === "string" ? error : stringify(error));
  const attributes = exceptionAttributes(err);
  return recordSpan(SPAN_NAMES.exception, attributes, options, {
    status: { status_code: "ERROR", description: err.message },
    exception: err,
  });
}

export function exceptionAttributes(err: Error): Record<string, string | boolean> {
  return {
    [ATTR.exceptionType]: err.name || err.constructor?.name || "Error",
    [ATTR.exceptionMessage]: err.message,
    [ATTR.exceptionEscaped]: true,
    [ATTR.exceptionStacktrace]: err.stack ?? "",
  };
}
