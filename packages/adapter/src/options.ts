import { InvalidArgumentError, parseOrThrow, type Span } from "@agl/core";
import { z } from "zod";

/**
 * Option schemas: bad options fail at construction with an error naming the field. They are strict:
 * a misspelled option (`repairHierachy: false`) would otherwise be ignored silently and the default
 * would apply, which is the kind of quiet misbehaviour that yields wrong training data.
 */
const pattern = z.union([
  z.instanceof(RegExp),
  z.string(),
  z.custom<(span: Span) => boolean>((v) => typeof v === "function"),
]);

export const TraceToTripletsOptionsSchema = z.strictObject({
  repairHierarchy: z.boolean().optional(),
  llmCallMatch: z.union([z.literal("auto"), pattern]).optional(),
  agentMatch: z
    .union([z.instanceof(RegExp), z.string()])
    .nullable()
    .optional(),
  excludeLlmCallInReward: z.boolean().optional(),
  rewardMatch: z.enum(["firstOccurrence", "firstSibling"]).optional(),
  skipEmptyTokenSpans: z.boolean().optional(),
  joinTokenIdsByResponseId: z.boolean().optional(),
  clockSkewSeconds: z.number().nonnegative().finite().optional(),
});

export const TraceToMessagesOptionsSchema = z.strictObject({
  llmCallMatch: z.union([z.literal("auto"), pattern]).optional(),
});
export const ProxySpansToTripletsOptionsSchema = z.strictObject({ keepFailedCalls: z.boolean().optional() });
export const TrajectoryOptionsSchema = z.strictObject({
  mode: z.enum(["trajectory", "transition"]).optional(),
});
/** `visualizeSpans`: TraceToTriplets' options plus the rendering ones, so an error lists all known keys. */
export const VisualizeSpansOptionsSchema = TraceToTripletsOptionsSchema.extend({
  format: z.enum(["text", "dot"]).optional(),
  durations: z.boolean().optional(),
});

export function parseOptions<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  // zod reports unknown keys at the object's path with a generic message; name the key in the path.
  const unknown = result.error.issues.find((i) => i.code === "unrecognized_keys");
  if (unknown?.code === "unrecognized_keys") {
    const at = [what, ...unknown.path.map(String), unknown.keys[0]].filter(Boolean).join(".");
    throw new InvalidArgumentError(
      at,
      `unknown option "${unknown.keys.join('", "')}"; known: ${knownKeys(schema).join(", ")}`,
    );
  }
  return parseOrThrow(schema, value ?? {}, what); // throws, naming the first bad field
}

function knownKeys(schema: z.ZodType): string[] {
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
}

/**
 * A cheap structural check of adapter input (a full zod parse of every span would dominate the
 * adapter's cost): an array of objects with string `span_id` and `name`.
 */
export function checkSpans(spans: unknown): asserts spans is Span[] {
  if (!Array.isArray(spans)) throw new InvalidArgumentError("spans", "expected an array of spans");
  for (let i = 0; i < spans.length; i++) {
    const s = spans[i] as Partial<Span> | null;
    if (typeof s !== "object" || s === null)
      throw new InvalidArgumentError(`spans[${i}]`, "expected a span object");
    if (typeof s.span_id !== "string")
      throw new InvalidArgumentError(`spans[${i}].span_id`, "expected a string");
    if (typeof s.name !== "string") throw new InvalidArgumentError(`spans[${i}].name`, "expected a string");
  }
}
