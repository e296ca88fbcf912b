/**
 * httpAgent: an agent whose rollouts run in a separately deployed agent service (verl's
 * agent_lightning_like recipe). Each rollout POSTs the task, the attempt's LLM base URL (the proxy
 * URL resolved for this rollout and attempt) and a trace id to the service; the service calls the
 * LLM through that URL, forwarding the trace id, and answers with the reward. Any failure or timeout
 * throws, so the runner fails the attempt cleanly.
 */
import { AglError, FunctionalLitAgent, newTraceId, type RolloutContext } from "@agl/core";
import ky from "ky";
import { z } from "zod";
import { toHttpError } from "./http/transport.js";

export interface HttpAgentOptions {
  /** The service endpoint that runs one rollout, e.g. http://agent:8000/rollout. */
  url: string;
  /** Give up on a rollout after this long. Default 10 minutes. */
  timeoutMs?: number;
  /** Extra headers (e.g. auth for the agent service). */
  headers?: Record<string, string>;
  /** Header carrying the trace id on the request (verl's recipe calls it `trace_id`). Default "trace_id". */
  traceHeader?: string;
  /** Name used in logs. Default "httpAgent". */
  name?: string;
}

/** What the agent service receives for one rollout. */
export interface HttpAgentRequest {
  task: unknown;
  rollout_id: string;
  attempt_id: string;
  mode: string | null;
  trace_id: string;
  /** OpenAI-compatible base URL for this attempt (calls through it are attributed to the attempt). */
  llm_base_url: string | null;
  model: string | null;
  api_key: string | null;
  sampling_parameters: Record<string, unknown>;
}

const HttpAgentResponseSchema = z.object({
  reward: z.number().nullable(),
});
export type HttpAgentResponse = z.infer<typeof HttpAgentResponseSchema>;

/** The service answered something that is not `{reward}`, or not 2xx. */
export class HttpAgentError extends AglError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "HttpAgentError";
  }
}

export function httpAgent(options: HttpAgentOptions): FunctionalLitAgent {
  const timeoutMs = options.timeoutMs ?? 600_000;
  const traceHeader = options.traceHeader ?? "trace_id";
  const client = ky.create({ timeout: timeoutMs, retry: 0, headers: options.headers ?? {} });

  const run = async (task: unknown, context: RolloutContext): Promise<number | undefined> => {
    const { rollout, llm } = context;
    const traceId = newTraceId();
    const body: HttpAgentRequest = {
      task,
      rollout_id: rollout.rollout_id,
      attempt_id: rollout.attempt.attempt_id,
      mode: rollout.mode,
      trace_id: traceId,
      llm_base_url: llm?.endpoint ?? null,
      model: llm?.model ?? null,
      api_key: llm?.api_key ?? null,
      sampling_parameters: llm?.sampling_parameters ?? {},
    };
    let payload: unknown;
    try {
      payload = await client
        .post(options.url, { json: body, headers: { [traceHeader]: traceId }, signal: context.signal })
        .json();
    } catch (error) {
      const httpError = await toHttpError(error, "POST", options.url);
      throw new HttpAgentError(
        `agent service failed on rollout ${rollout.rollout_id}: ${httpError.message}`,
        {
          cause: httpError,
        },
      );
    }
    const parsed = HttpAgentResponseSchema.safeParse(payload);
    if (!parsed.success) {
      throw new HttpAgentError(
        `agent service answered ${JSON.stringify(payload)?.slice(0, 200)} for rollout ${rollout.rollout_id}; expected {"reward": number | null}`,
      );
    }
    return parsed.data.reward ?? undefined;
  };
  return new FunctionalLitAgent(run, { name: options.name ?? "httpAgent" });
}
