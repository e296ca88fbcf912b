import { z } from "zod";
import { parseOptions } from "../options.js";
import type { MockLLMServerOptions } from "./server.js";

const nonNegativeInt = z.number().int().min(0);

/** Checked at start, so a typo or a bad value fails naming the field instead of a silently odd mock. */
export const MockLLMServerOptionsSchema = z
  .object({
    respond: z.custom<NonNullable<MockLLMServerOptions["respond"]>>(
      (v) => typeof v === "function",
      "must be a function (request, choiceIndex) => reply",
    ),
    alwaysReturnTokenIds: z.boolean(),
    failFirst: nonNegativeInt,
    hang: z.boolean(),
    dieAfterChunks: nonNegativeInt,
    delayMs: z.number().min(0),
    chunkDelayMs: z.number().min(0),
    models: z.array(z.string().min(1)).min(1),
    host: z.string().min(1),
    port: z.number().int().min(0).max(65535),
  })
  .partial();

export function parseMockLLMServerOptions(options: unknown): MockLLMServerOptions {
  return parseOptions(MockLLMServerOptionsSchema, options, "mockLLMServer");
}
