import { InvalidArgumentError, type LightningStore, parseOrThrow, unstorableString } from "@agl/core";
import { z } from "zod";

/**
 * A policy version recorded on every later span (`agl.proxy.model_version`): a string every store can keep
 * (no NUL, no lone surrogate: else each span would be rejected while calls still answer 200) or a number.
 */
export const ModelVersionSchema = z.union([
  z.string().superRefine((s, ctx) => {
    const problem = unstorableString(s);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  }),
  z.number(),
]);

/** `version` checked (InvalidArgumentError naming `what` otherwise). */
export const checkModelVersion = (version: unknown, what = "modelVersion"): string | number | null =>
  parseOrThrow(ModelVersionSchema.nullable(), version, what);

/** The part of a LightningStore the proxy writes to (the batch methods are used when present). Any store satisfies it. */
export type SpanSink = Pick<LightningStore, "addSpan" | "getNextSpanSequenceId"> &
  Partial<Pick<LightningStore, "addManySpans" | "getManySpanSequenceIds">>;

export interface ProxyLogger {
  warn(message: string): void;
  error(message: string): void;
}

const BackendSchema = z.object({
  url: z.string().url(),
  model: z.string().min(1).optional(),
  weight: z.number().positive().optional(),
  apiKey: z.string().optional(),
});

const ModeSchema = z.object({
  /** Forced temperature for calls in this mode (null: keep the client's). */
  temperature: z.number().min(0).nullable().default(null),
  /** Inject logprobs in this mode. */
  logprobs: z.boolean().default(true),
});

export const LLMProxyOptionsSchema = z.object({
  store: z.custom<SpanSink>(
    (v) =>
      typeof (v as any)?.addSpan === "function" && typeof (v as any)?.getNextSpanSequenceId === "function",
    "must implement addSpan and getNextSpanSequenceId",
  ),
  /** HTTP upstreams; may be empty in relay mode, where workers connect on /ws/worker. */
  backends: z.array(BackendSchema).default([]),
  /**
   * Relay mode: inference workers dial out to `/ws/worker` with this token and join the backends while
   * connected (see README "Relay mode"). Null: no WebSocket endpoint.
   */
  relay: z
    .object({
      workerToken: z.string().min(16),
      /** A call arriving while no backend at all is connected waits this long for a worker, then 503. */
      waitForWorkerMs: z.number().int().min(0).default(30_000),
      helloTimeoutMs: z.number().int().positive().default(10_000),
      pingIntervalMs: z.number().int().positive().default(15_000),
      maxFrameBytes: z
        .number()
        .int()
        .positive()
        .default(64 * 1024 * 1024),
    })
    .nullable()
    .default(null),
  host: z.string().default("127.0.0.1"),
  port: z.number().int().min(0).max(65535).default(0),
  /**
   * Base URL other machines reach this proxy at (e.g. "http://trainer-1:8100"), published in
   * `asResource()`. Default: the bound address (0.0.0.0 becomes 127.0.0.1, fine on one machine only).
   */
  publicUrl: z
    .string()
    .url()
    .refine((u) => /^https?:\/\//.test(u), "must be an http(s) URL")
    .nullable()
    .default(null),
  /** Guards the control routes; null leaves them open (a warning is logged). */
  adminToken: z.string().min(8).nullable().default(null),
  /**
   * Who may call the LLM routes. "none": anyone; "token": the admin token or a per-attempt token, which
   * then must match the call's attribution. Default "token" when an admin token is set, else "none".
   */
  llmAuth: z.enum(["none", "token"]).optional(),
  /** HMAC secret for per-attempt tokens; random per process by default. */
  tokenSecret: z.string().min(16).optional(),
  /** Public model name (for /v1/models and the rewrite when a backend names none). */
  model: z.string().min(1).nullable().default(null),
  /**
   * Several policies behind one proxy (one LoRA adapter per agent role): the model name an agent asks
   * for → the policy it is routed to (`policy`, recorded on the span as `agl.proxy.policy`; `null` for a
   * role nothing trains) and the name the backend serves it under (`model`, default the same name).
   * With policies set, a call naming neither a policy nor `model` is refused (404 on `model`).
   */
  policies: z
    .record(
      z.string().min(1),
      z.strictObject({ policy: z.string().min(1).nullable(), model: z.string().min(1).optional() }),
    )
    .default({}),
  /** Rewrite the request's `model` to the backend's (or the proxy's) model name. */
  rewriteModel: z.boolean().default(true),
  /** Ask vLLM for `prompt_token_ids`/`token_ids`. */
  returnTokenIds: z.boolean().default(true),
  /** Inject logprobs when the client did not ask: chat `logprobs:true`, completions `logprobs:1`. */
  logprobs: z.boolean().default(true),
  /** Add `stream_options.include_usage` to streamed calls. */
  includeUsageInStreams: z.boolean().default(true),
  /**
   * Apply the sampling parameters of the LLM resource a call's rollout was given (its `proxy_llm`'s
   * `sampling_parameters`, read from the store): the call's own temperature/top_p/top_k win, its
   * max_tokens may only be tighter (see resource-sampling.ts). Needs a store that reads rollouts.
   */
  resourceSampling: z.boolean().default(true),
  /** Rewrites for the v1.0 path's `mode/{train|val}` (Agent Lightning v1.0 defaults). */
  modes: z
    .object({
      train: ModeSchema.default({ temperature: 1, logprobs: true }),
      val: ModeSchema.default({ temperature: 0.7, logprobs: false }),
    })
    .default({ train: { temperature: 1, logprobs: true }, val: { temperature: 0.7, logprobs: false } }),
  /** Header carrying a rollout-wide trace id (verl recipe 003). */
  traceHeader: z.string().min(1).default("trace_id"),
  /** Calls with no attribution: forwarded without a span, or rejected with 400. */
  unattributed: z.enum(["forward", "reject"]).default("forward"),
  /**
   * Calls naming a rollout attempt the store does not have (path, v1.0 path, headers, token, bound
   * session or trace id): 404 as Agent Lightning v1.0 ("reject"; needs a store with `queryAttempts`,
   * answers are cached), or forwarded, their span then rejected by the store, logged and counted.
   */
  unknownAttempts: z.enum(["reject", "forward"]).default("reject"),
  /** Extra tries after the first, each on the next-ranked backend. */
  retries: z.number().int().min(0).default(3),
  backoffBaseMs: z.number().min(0).default(250),
  backoffMaxMs: z.number().min(0).default(4_000),
  /** Per upstream attempt: no byte from the upstream for this long fails the attempt. */
  timeoutMs: z.number().int().positive().default(300_000),
  /** Send an SSE comment on a stream that has been silent this long (0 = never). */
  sseKeepAliveMs: z.number().int().min(0).default(15_000),
  /** Body size limit for incoming requests. */
  maxBodyBytes: z
    .number()
    .int()
    .positive()
    .default(16 * 1024 * 1024),
  /** What paused calls get, unless a pause says otherwise. */
  pauseMode: z.enum(["reject", "hold"]).default("reject"),
  /** `Retry-After` of paused calls, unless a pause says otherwise. */
  retryAfterSeconds: z.number().min(0).default(5),
  /** Hold mode: a parked call is turned away (429) after this long. */
  maxHoldMs: z.number().int().positive().default(600_000),
  /**
   * Also record the raw request/response bodies (roughly doubles a span's size and the store's cost).
   * Off by default here and in the CLI (`--capture-bodies`): every number is in the parsed attributes.
   */
  captureBodies: z.boolean().default(false),
  maxBodyChars: z.number().int().positive().default(1_000_000),
  healthCheckIntervalMs: z.number().int().min(0).default(5_000),
  healthCheckTimeoutMs: z.number().int().positive().default(2_000),
  allowedFailures: z.number().int().positive().default(3),
  cooldownMs: z.number().int().min(0).default(10_000),
  modelVersion: ModelVersionSchema.nullable().default(null),
  /**
   * `/v1/responses` state (`previous_response_id`, `item_reference`): the in-process cache's budget, by
   * the JSON size of the conversations and items it holds. The store (the spans) is the record; this only
   * saves store reads.
   */
  responseCacheBytes: z
    .number()
    .int()
    .min(0)
    .default(64 * 1024 * 1024),
  /**
   * How long a response id whose span is not in the store yet is looked for again before the 400 (another
   * replica answered the client a moment before its span write landed).
   */
  responseStateWaitMs: z.number().int().min(0).default(3_000),
  /** Grace period for in-flight calls on stop(). */
  shutdownGraceMs: z.number().int().min(0).default(10_000),
  logger: z.custom<ProxyLogger>((v) => typeof (v as any)?.warn === "function").optional(),
});

export type LLMProxyOptions = z.input<typeof LLMProxyOptionsSchema>;
export type ResolvedProxyOptions = z.output<typeof LLMProxyOptionsSchema> & { llmAuth: "none" | "token" };

export function resolveOptions(options: LLMProxyOptions): ResolvedProxyOptions {
  const parsed = parseOrThrow(LLMProxyOptionsSchema, options, "LLMProxyOptions");
  if (parsed.backends.length === 0 && parsed.relay === null) {
    throw new InvalidArgumentError(
      "LLMProxyOptions.backends",
      "at least one backend is required (or relay mode)",
    );
  }
  return { ...parsed, llmAuth: parsed.llmAuth ?? (parsed.adminToken ? "token" : "none") };
}
