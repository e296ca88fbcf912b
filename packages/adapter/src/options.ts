import { InvalidArgumentError, parseOrThrow, type Span } from "@agl/core";
import { z } from "zod";

/** Option schemas: bad options fail at construction with an error naming the field. */
const pattern = z.union([
  z.instanceof(RegExp),
  z.string(),
  z.custom<(span: Span) => boolean>((v) => typeof v === "function"),
]);

export const TraceToTripletsOptionsSchema = z.object({
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

export const TraceToMessagesOptionsSchema = z.object({
  llmCallMatch: z.union([z.literal("auto"), pattern]).optional(),
});
export const ProxySpansToTripletsOptionsSchema = z.object({ keepFailedCalls: z.boolean().optional() });
export const TrajectoryOptionsSchema = z.object({ mode: z.enum(["trajectory", "transition"]).optional() });

export function parseOptions<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  return parseOrThrow(schema, value ?? {}, what);
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
