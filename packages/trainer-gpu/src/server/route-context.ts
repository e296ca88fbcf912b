import { randomBytes } from "node:crypto";
import type { Context } from "hono";
import type { z } from "zod";
import type { GenerationEngine } from "../generate/engine.js";
import type { GenerateRequest, GenerateResult, TokenEvent } from "../generate/request.js";
import type { SamplingDefaults } from "../generate/sampling-defaults.js";
import type { ChatEncoder, TextTokenizer } from "../tokenizer/text-tokenizer.js";
import type { ServedModel, ServedModels } from "./adapters-registry.js";
import { type ChatCompletionRequest, type CompletionRequest, HttpError, zodToHttpError } from "./schemas.js";

export function newId(prefix: string): string {
  return `${prefix}-${randomBytes(12).toString("hex")}`;
}

export const nowSec = () => Math.floor(Date.now() / 1000);

/** The JSON body parsed with `schema`: OpenAI-style 400s for malformed JSON and for the first bad field. */
export async function parseJsonBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.infer<S>> {
  let raw: unknown;
  try {
    raw = await c.req.json();
  } catch {
    throw new HttpError(400, "Request body is not valid JSON", null, "invalid_json");
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw zodToHttpError(parsed.error);
  return parsed.data;
}

/** What the route handlers share: the engine, the tokenizer/template, and request-level helpers. */
export class RouteContext {
  constructor(
    readonly generator: GenerationEngine,
    readonly tokenizer: TextTokenizer,
    readonly template: ChatEncoder,
    /** The served names and the adapter each runs with. */
    readonly models: ServedModels,
    readonly requestTimeoutMs: number,
    /** Applied where a request leaves a field out (max_tokens: a ceiling). */
    readonly samplingDefaults: SamplingDefaults = {},
  ) {}

  get modelName(): string {
    return this.models.primary;
  }

  get version(): number {
    return this.generator.version;
  }

  get contextLength(): number {
    return this.generator.policy.config.contextLength;
  }

  /**
   * Parse the JSON body with `schema` (OpenAI-style 400s) and resolve its model name (vLLM's 404 for an
   * unknown one).
   */
  async body<S extends z.ZodType>(c: Context, schema: S): Promise<z.infer<S> & { served: ServedModel }> {
    const data = await parseJsonBody(c, schema);
    const served = this.models.resolve((data as { model: string }).model);
    return Object.assign(data as object, { served }) as z.infer<S> & { served: ServedModel };
  }

  checkPrompt(ids: number[], param: string): void {
    const ctx = this.contextLength;
    if (ids.length >= ctx) {
      throw new HttpError(
        400,
        `This model's maximum context length is ${ctx} tokens, but the prompt has ${ids.length} tokens (at least one must be left for the completion)`,
        param,
        "context_length_exceeded",
      );
    }
  }

  genParams(
    body: ChatCompletionRequest | CompletionRequest,
    promptLen: number,
    maxTokens: number | null | undefined,
  ) {
    const room = this.contextLength - promptLen;
    const stop = body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop;
    const d = this.samplingDefaults;
    return {
      // A request for more tokens than fit is clamped; generation ends with finish_reason "length".
      maxTokens: Math.min(maxTokens ?? room, d.maxTokens ?? room, room),
      // vLLM's precedence: the request, else the server's defaults (generation_config.json), else neutral.
      temperature: body.temperature ?? d.temperature ?? 1,
      topP: body.top_p ?? d.topP ?? 1,
      topK: body.top_k != null ? Math.max(body.top_k, 0) : (d.topK ?? 0),
      stop,
      ignoreEos: body.ignore_eos ?? false,
    };
  }

  /** Aborts generation when the client disconnects or the request deadline passes. */
  signal(c: Context): { signal: AbortSignal; timedOut: () => boolean } {
    const timeout = AbortSignal.timeout(this.requestTimeoutMs);
    return { signal: AbortSignal.any([c.req.raw.signal, timeout]), timedOut: () => timeout.aborted };
  }

  /** The `n` generation requests of one HTTP request; choice i samples with `seed + i`. */
  requests(
    n: number,
    base: Omit<GenerateRequest, "seed">,
    seed: number | null | undefined,
    onToken?: (i: number, e: TokenEvent) => void,
  ): GenerateRequest[] {
    return Array.from({ length: n }, (_, i) => ({
      ...base,
      seed: seed == null ? undefined : seed + i,
      onToken: onToken ? (e: TokenEvent) => onToken(i, e) : undefined,
      // A streamed response names its version before the first token: it must finish on that version.
      ...(onToken ? { pinVersion: true } : {}),
    }));
  }
}

/**
 * Set the version headers of a non-streamed response and return the version that finished it:
 * `x-agl-model-version` = the newest version that produced a token of any choice, and, when a choice was
 * resumed on newer weights mid-generation (partial rollouts), `x-agl-model-version-start` = the oldest.
 */
export function setVersionHeaders(c: Context, results: readonly GenerateResult[], fallback: number): number {
  const version = results.length ? Math.max(...results.map((x) => x.modelVersion)) : fallback;
  c.header("x-agl-model-version", String(version));
  const starts = results.flatMap((x) => (x.versionSegments ? [x.versionSegments[0]!.version] : []));
  if (starts.length) c.header("x-agl-model-version-start", String(Math.min(...starts)));
  return version;
}
