import { instrumentOpenAI, type LightningTracer, type Logger } from "@agl/core";
import OpenAI from "openai";
import type { ProblemCounter } from "./problems.js";

export type OptimizerRole = "gradient" | "edit";

export interface OptimizerClientOptions {
  /** An `openai` client to start from (its base URL, key and headers are kept). */
  client?: OpenAI;
  baseURL?: string;
  apiKey?: string;
  /** Per HTTP attempt. */
  timeoutMs: number;
  /** Retries of 408/409/429/5xx and connection errors, with the SDK's exponential backoff (Retry-After honoured). */
  maxRetries: number;
  temperature: number;
  tracer: LightningTracer;
  logger: Logger;
  problems: ProblemCounter;
}

export type OptimizerReply =
  | { ok: true; text: string | null }
  | { ok: false; problem: "rate_limit_exhausted" | "timeout" | "api_error"; message: string };

/**
 * The optimiser's model calls through the `openai` SDK: traced by instrumentOpenAI (so the spans land in
 * whatever attempt is being traced), bounded by a timeout, retried with backoff by the SDK. Every HTTP
 * attempt that hits a rate limit or a server error is counted; a call that still fails is reported as a
 * value, never thrown, so one bad call costs one candidate and not the run.
 */
export class OptimizerClient {
  private readonly client: OpenAI;
  private readonly temperature: number;
  private readonly logger: Logger;
  private readonly problems: ProblemCounter;
  calls = 0;

  constructor(options: OptimizerClientOptions) {
    const { problems } = options;
    const base =
      options.client ??
      new OpenAI({
        baseURL: options.baseURL ?? process.env.OPENAI_BASE_URL,
        apiKey: options.apiKey ?? process.env.OPENAI_API_KEY ?? "not-needed",
      });
    const innerFetch: typeof fetch = (base as unknown as { fetch?: typeof fetch }).fetch ?? fetch;
    const countingFetch: typeof fetch = async (input, init) => {
      const response = await innerFetch(input, init);
      if (response.status === 429) problems.add("rate_limited");
      else if (response.status >= 500) problems.add("server_error");
      return response;
    };
    this.client = instrumentOpenAI(
      base.withOptions({
        timeout: options.timeoutMs,
        maxRetries: options.maxRetries,
        fetch: countingFetch,
      }),
      { tracer: options.tracer },
    );
    this.temperature = options.temperature;
    this.logger = options.logger;
    this.problems = problems;
  }

  async complete(
    role: OptimizerRole,
    model: string,
    messages: Array<{ role: "system" | "user"; content: string }>,
    signal?: AbortSignal,
  ): Promise<OptimizerReply> {
    this.calls++;
    // A signal of its own per call: the SDK never removes the listener it adds to the signal it is given,
    // and the Trainer's signal lives for the whole run.
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const reply = await this.client.chat.completions.create(
        { model, messages, temperature: this.temperature },
        { signal: controller.signal },
      );
      const content = reply.choices?.[0]?.message?.content;
      return { ok: true, text: typeof content === "string" ? content : null };
    } catch (error) {
      if (signal?.aborted) throw error;
      const problem =
        error instanceof OpenAI.RateLimitError
          ? "rate_limit_exhausted"
          : error instanceof OpenAI.APIConnectionTimeoutError
            ? "timeout"
            : "api_error";
      const message = error instanceof Error ? error.message : String(error);
      this.problems.add(problem);
      this.logger.warn(`apo: ${role} call to ${model} failed (${problem}): ${message}`);
      return { ok: false, problem, message };
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }
}
