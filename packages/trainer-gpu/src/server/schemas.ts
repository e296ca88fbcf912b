import { z } from "zod";

/**
 * Request bodies of the OpenAI-compatible routes. Objects are not strict: SDKs send fields we do not
 * use (user, metadata, ...), and vLLM accepts and ignores them too. Messages and tools are validated by
 * the chat template so errors name the exact field.
 */

const Stop = z.union([z.string(), z.array(z.string()).max(16)]).nullish();

const Sampling = {
  model: z.string().min(1),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().min(-1).nullish(),
  n: z.number().int().min(1).max(16).nullish(),
  max_tokens: z.number().int().min(1).nullish(),
  stop: Stop,
  seed: z.number().int().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  /** vLLM: return prompt and output token ids. */
  return_token_ids: z.boolean().nullish(),
  ignore_eos: z.boolean().nullish(),
};

export const ChatCompletionRequestSchema = z.object({
  ...Sampling,
  messages: z.array(z.unknown()).min(1),
  tools: z.array(z.unknown()).nullish(),
  tool_choice: z
    .union([
      z.enum(["none", "auto", "required"]),
      z.object({ type: z.literal("function"), function: z.object({ name: z.string() }) }),
    ])
    .nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

export const CompletionRequestSchema = z.object({
  ...Sampling,
  prompt: z.union([
    z.string(),
    z.array(z.number().int()).min(1),
    z.array(z.string()).length(1),
    z.array(z.array(z.number().int()).min(1)).length(1),
  ]),
  /** vLLM: run the tokenizer's post-processor on a text prompt (e.g. add a Llama bos); default true. */
  add_special_tokens: z.boolean().nullish(),
  /** Completions API: number of top alternatives per token (0 = only the sampled token's logprob). */
  logprobs: z.number().int().min(0).max(20).nullish(),
  echo: z.literal(false).nullish(),
});
export type CompletionRequest = z.infer<typeof CompletionRequestSchema>;

/** The OpenAI error body. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

const HTTP_ERROR = Symbol.for("agl.PolicyServerHttpError");

/** An error answered with an OpenAI-style body and the given status. */
export class HttpError extends Error {
  readonly [HTTP_ERROR] = true;

  static isInstance(error: unknown): error is HttpError {
    return (
      typeof error === "object" && error !== null && (error as Record<symbol, unknown>)[HTTP_ERROR] === true
    );
  }

  constructor(
    readonly status: 400 | 401 | 404 | 413 | 500 | 503 | 504,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly type = status === 401
      ? "authentication_error"
      : status >= 500
        ? "server_error"
        : "invalid_request_error",
  ) {
    super(message);
    this.name = "HttpError";
  }

  get body(): OpenAIErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export function zodToHttpError(error: z.ZodError): HttpError {
  const issue = error.issues[0];
  const param = issue && issue.path.length > 0 ? issue.path.join(".") : null;
  return new HttpError(
    400,
    `Invalid request${param ? ` field ${param}` : ""}: ${issue?.message ?? "malformed body"}`,
    param,
    "invalid_value",
  );
}
