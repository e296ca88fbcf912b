import { z } from "zod";

export const StatusCodeSchema = z.enum(["UNSET", "OK", "ERROR"]);
export type StatusCode = z.infer<typeof StatusCodeSchema>;

export const SpanStatusSchema = z.looseObject({
  status_code: StatusCodeSchema.default("UNSET"),
  description: z.string().nullable().default(null),
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
export const AttributesSchema = z.record(z.string(), z.any());
export type Attributes = Record<string, AttributeValue>;

export const SpanContextSchema = z.looseObject({
  trace_id: z.string(),
  span_id: z.string(),
  is_remote: z.boolean().default(false),
  trace_state: z.record(z.string(), z.string()).default(() => ({})),
});
export type SpanContext = z.infer<typeof SpanContextSchema>;

export const SpanEventSchema = z.looseObject({
  name: z.string(),
  attributes: AttributesSchema.default(() => ({})),
  timestamp: z.number().nullable().default(null),
});
export type SpanEvent = z.infer<typeof SpanEventSchema>;

export const SpanLinkSchema = z.looseObject({
  context: SpanContextSchema,
  attributes: AttributesSchema.nullable().default(null),
});
export type SpanLink = z.infer<typeof SpanLinkSchema>;

export const OtelResourceSchema = z.looseObject({
  attributes: AttributesSchema.default(() => ({})),
  schema_url: z.string().default(""),
});
export type OtelResource = z.infer<typeof OtelResourceSchema>;

/**
 * A stored span (Agent Lightning v0.3 shape). Unknown keys are preserved and echoed back,
 * as the reference requires.
 */
export const SpanSchema = z.looseObject({
  rollout_id: z.string(),
  attempt_id: z.string(),
  sequence_id: z.number().int(),
  trace_id: z.string(),
  span_id: z.string(),
  parent_id: z.string().nullable().default(null),
  name: z.string(),
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
