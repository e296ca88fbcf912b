import { z } from "zod";
import {
  IdStringSchema,
  MAX_SPAN_SEQUENCE_ID,
  StorableJsonSchema,
  StorableRecordSchema,
  StorableStringSchema,
  unstorableString,
} from "./input-rules.js";

/**
 * Like z.looseObject (unknown keys are kept), but unknown keys and values must be storable too (a
 * catchall checks values only: a NUL in an unknown key of `context` once reached PostgreSQL).
 */
const openObject = <S extends z.core.$ZodLooseShape>(shape: S) =>
  z
    .object(shape)
    .catchall(StorableJsonSchema)
    .superRefine((value, ctx) => {
      for (const key of Object.keys(value)) {
        if (Object.hasOwn(shape, key)) continue;
        const problem = unstorableString(key);
        if (problem) ctx.addIssue({ code: "custom", path: [key], message: `key ${problem}` });
      }
    });

export const StatusCodeSchema = z.enum(["UNSET", "OK", "ERROR"]);
export type StatusCode = z.infer<typeof StatusCodeSchema>;

export const SpanStatusSchema = openObject({
  status_code: StatusCodeSchema.default("UNSET"),
  description: StorableStringSchema.nullable().default(null),
});
export type SpanStatus = z.infer<typeof SpanStatusSchema>;

/** Attribute values: primitives, homogeneous lists, and (from OTLP ingest) nested objects. */
export type AttributeValue =
  | string
  | number
  | boolean
  | null
  | AttributeValue[]
  | { [k: string]: AttributeValue };
export const AttributesSchema = StorableRecordSchema;
export type Attributes = Record<string, AttributeValue>;

export const SpanContextSchema = openObject({
  trace_id: StorableStringSchema,
  span_id: StorableStringSchema,
  is_remote: z.boolean().default(false),
  trace_state: z.record(StorableStringSchema, StorableStringSchema).default(() => ({})),
});
export type SpanContext = z.infer<typeof SpanContextSchema>;

export const SpanEventSchema = openObject({
  name: StorableStringSchema,
  attributes: AttributesSchema.default(() => ({})),
  timestamp: z.number().nullable().default(null),
});
export type SpanEvent = z.infer<typeof SpanEventSchema>;

export const SpanLinkSchema = openObject({
  context: SpanContextSchema,
  attributes: AttributesSchema.nullable().default(null),
});
export type SpanLink = z.infer<typeof SpanLinkSchema>;

export const OtelResourceSchema = openObject({
  attributes: AttributesSchema.default(() => ({})),
  schema_url: StorableStringSchema.default(""),
});
export type OtelResource = z.infer<typeof OtelResourceSchema>;

/**
 * A stored span (Agent Lightning v0.3 shape). Unknown keys are preserved and echoed back,
 * as the reference requires.
 */
export const SpanSchema = openObject({
  rollout_id: IdStringSchema,
  attempt_id: IdStringSchema,
  sequence_id: z.number().int().min(0).max(MAX_SPAN_SEQUENCE_ID),
  trace_id: StorableStringSchema,
  span_id: StorableStringSchema,
  parent_id: StorableStringSchema.nullable().default(null),
  name: StorableStringSchema,
  status: SpanStatusSchema.default(() => ({ status_code: "UNSET" as const, description: null })),
  attributes: AttributesSchema.default(() => ({})),
  events: z.array(SpanEventSchema).default(() => []),
  links: z.array(SpanLinkSchema).default(() => []),
  start_time: z.number().nullable().default(null),
  end_time: z.number().nullable().default(null),
  context: SpanContextSchema.nullable().default(null),
  parent: SpanContextSchema.nullable().default(null),
  resource: OtelResourceSchema.default(() => ({ attributes: {}, schema_url: "" })),
});
export type Span = z.infer<typeof SpanSchema>;
export type SpanInput = z.input<typeof SpanSchema>;

/** What emitters return: the parts of a span that do not depend on where it is stored. */
export interface SpanCoreFields {
  name: string;
  status: SpanStatus;
  attributes: Attributes;
  start_time: number | null;
  end_time: number | null;
}
