import type { SampledToken } from "./sampling.js";

// The public shapes of the generation API — what callers send, what streams back per token and what a
// finished sequence resolves to — apart from the scheduler so the server's routes depend only on these.

export interface GenerateParams {
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  /** Seed of this sequence's sampler; random when absent. */
  seed?: number;
  /** Stop strings: generation ends when the text ends with one; it is cut from `text` (ids keep it). */
  stop?: readonly string[];
  /** Keep sampling past the eos tokens (benchmarks). */
  ignoreEos?: boolean;
  /** How many most-likely alternatives to report per token (raw distribution). */
  topLogprobs?: number;
  /**
   * Forced decoding: the output begins with one of these id sequences. While it is on them, each step
   * samples only among the ids that keep it on one (an id that is the only one allowed is taken as is and
   * marked `forced`); after one is complete, generation is free. Logprobs stay the model's raw ones.
   */
  prefixChoices?: readonly (readonly number[])[];
}

export interface GenerateRequest extends GenerateParams {
  promptIds: readonly number[];
  /**
   * The LoRA adapter this sequence runs with (multi-LoRA serving; the model must list it in
   * `adapterNames`), `null` for the base weights alone; absent: the model's default. Sequences of
   * different adapters decode together in one batch.
   */
  adapter?: string | null;
  signal?: AbortSignal;
  /**
   * Keep this sequence on the weights it started on even when the engine resumes in-flight sequences on
   * newly published weights (`VersionedEngine` with `inFlight: "resume"`): a streamed response has
   * announced its version before its first token.
   */
  pinVersion?: boolean;
  /** Called once per step with the new token and the text that became final (stop-string hold-back). */
  onToken?: (event: TokenEvent) => void;
}

export interface TokenEvent {
  /** The sampled token; absent on the final event that only releases held-back text. */
  token?: GeneratedToken;
  /** Newly released text (may be empty while a possible stop string is being held back). */
  textDelta: string;
  /**
   * The weights version generating this sequence (fixed from its admission on): what a streamed
   * response reports before its first byte, as a non-streamed one reports `GenerateResult.modelVersion`.
   */
  modelVersion?: number;
}

/**
 * `requests` with their token events stamped with `version`: for engines that bind a request to a
 * version themselves (snapshots, worker replicas) and whose inner generator counts versions of its own.
 */
export function withModelVersion(requests: readonly GenerateRequest[], version: number): GenerateRequest[] {
  return requests.map((r) => {
    const onToken = r.onToken;
    return onToken ? { ...r, onToken: (e: TokenEvent) => onToken({ ...e, modelVersion: version }) } : r;
  });
}

export interface GeneratedToken extends SampledToken {
  topLogprobs?: Array<{ id: number; logprob: number }>;
  /** The id was the only one `prefixChoices` allowed: the model did not choose it (`samplingLogprob` 0). */
  forced?: boolean;
}

export type FinishReason = "stop" | "length" | "abort";

export interface GenerateResult {
  promptIds: number[];
  /** Generated ids, including the `<eos>` that ended generation (as vLLM includes the stop token). */
  tokenIds: number[];
  tokens: GeneratedToken[];
  /** Decoded output without control tokens, cut at a matched stop string. */
  text: string;
  finishReason: FinishReason;
  /** The weights version that produced every token of this result (the last one, when resumed). */
  modelVersion: number;
  /**
   * Only on a sequence resumed on newer weights mid-generation (partial rollouts): which version produced
   * which tokens — tokens from `fromToken` up to the next segment's came from `version`; the first
   * segment's version is the oldest.
   */
  versionSegments?: VersionSegment[];
}

export interface VersionSegment {
  version: number;
  /** Index in `tokens` of the first token this version produced. */
  fromToken: number;
}
