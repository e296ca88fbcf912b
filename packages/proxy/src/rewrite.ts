import type { Backend } from "./backends.js";
import type { ResolvedProxyOptions } from "./options.js";
import type { Mode } from "./routes.js";

/**
 * The request body as sent to each backend. Everything but `model` is rewritten once; `model` depends on
 * the backend (replicas may serve different names), so the serialised payload is kept per model name and
 * a failover to a backend with another name re-serialises instead of sending the first backend's name.
 */
export class UpstreamRequest {
  private text = "";
  private bytes: Buffer | null = null;
  private currentModel: unknown = undefined;

  constructor(
    /** Mutated in place to the body last sent (what the span records). */
    readonly body: Record<string, any>,
    private readonly o: Pick<ResolvedProxyOptions, "rewriteModel" | "model">,
    /** A policy route's backend model name: every backend gets it (one server serves every policy). */
    private readonly routedModel: string | null = null,
  ) {}

  /** The model name this backend gets (unchanged when rewriting is off or no name is configured). */
  modelFor(backend: Pick<Backend, "model">): unknown {
    if (this.routedModel !== null) return this.routedModel;
    if (!this.o.rewriteModel) return this.body.model;
    return backend.model ?? this.o.model ?? this.body.model;
  }

  /** Point the body at `backend` and return the exact bytes to send. */
  payloadFor(backend: Pick<Backend, "model">): Buffer {
    const model = this.modelFor(backend);
    if (this.bytes === null || model !== this.currentModel) {
      if (model !== undefined) this.body.model = model;
      this.currentModel = model;
      this.text = JSON.stringify(this.body);
      this.bytes = Buffer.from(this.text);
    }
    return this.bytes;
  }

  /** The JSON text last sent (for `agl.proxy.request`). */
  get sentText(): string {
    return this.text;
  }
}

/**
 * The backend-independent rewrites: the v1.0 mode's temperature, `return_token_ids`, logprobs unless the
 * client asked for more, usage on streams. Returns a warning when a training call's logprobs will not be
 * the sampling distribution.
 */
export function rewriteRequest(
  body: Record<string, any>,
  isChat: boolean,
  mode: Mode | null,
  o: Pick<ResolvedProxyOptions, "modes" | "returnTokenIds" | "logprobs" | "includeUsageInStreams">,
): { key: string; message: string } | null {
  const modeConfig = mode ? o.modes[mode] : null;
  if (modeConfig && modeConfig.temperature !== null) body.temperature = modeConfig.temperature;
  if (o.returnTokenIds) body.return_token_ids = true;
  const wantLogprobs = modeConfig ? modeConfig.logprobs : o.logprobs;
  if (wantLogprobs) {
    if (isChat && body.logprobs !== true) body.logprobs = true;
    if (!isChat && typeof body.logprobs !== "number") body.logprobs = 1;
  }
  if (body.stream === true && o.includeUsageInStreams) {
    body.stream_options = { ...(body.stream_options ?? {}), include_usage: true };
  }
  const temperature = body.temperature ?? 1;
  const hasLogprobs = isChat ? body.logprobs === true : typeof body.logprobs === "number";
  if (hasLogprobs && temperature !== 1 && mode !== "val") {
    return {
      key: `temperature:${temperature}`,
      message:
        `training call with temperature ${temperature} ≠ 1: vLLM's default raw logprobs are computed before ` +
        "temperature, so they are not the sampling distribution (set train temperature 1 or --logprobs-mode processed_logprobs)",
    };
  }
  return null;
}
