import { RolloutConfigSchema } from "@agl/core";
import type OpenAI from "openai";
import { z } from "zod";
import type { RandomSource } from "./beam.js";
import type { EditInstruction, GradientInstruction } from "./instructions.js";

const isInstruction = (v: unknown) =>
  typeof v === "object" &&
  v !== null &&
  typeof (v as GradientInstruction).name === "string" &&
  typeof (v as GradientInstruction).messages === "function";

const positiveInt = z.number().int().min(1);

export const ApoOptionsSchema = z.object({
  /** The optimiser's `openai` client; its base URL, key and headers are kept (timeouts and retries are APO's). */
  client: z
    .custom<OpenAI>(
      (v) => typeof (v as OpenAI)?.withOptions === "function",
      "must be an openai client (new OpenAI(...))",
    )
    .optional(),
  /** Base URL of any OpenAI-compatible endpoint for the optimiser (default $OPENAI_BASE_URL). */
  baseURL: z.url().optional(),
  /** Its key (default $OPENAI_API_KEY). */
  apiKey: z.string().optional(),
  /** Model that writes the critique (textual gradient). */
  gradientModel: z.string().min(1).default("gpt-5-mini"),
  /** Model that rewrites the prompt from the critique. */
  applyEditModel: z.string().min(1).default("gpt-4.1-mini"),
  /** Sampling temperature of both optimiser models; higher gives more varied candidates. */
  diversityTemperature: z.number().min(0).max(2).default(1),
  /** Training tasks run per critique (the experiments the critique model reads). */
  gradientBatchSize: positiveInt.default(4),
  /** Validation tasks each round's candidates are compared on. */
  valBatchSize: positiveInt.default(16),
  /** Prompts kept after each round. */
  beamWidth: positiveInt.default(4),
  /** Candidates made from each parent per round. */
  branchFactor: positiveInt.default(4),
  /** Rounds of the beam search (more can be added later by resuming with a larger number). */
  beamRounds: z.number().int().min(0).default(3),
  /** Longest wait for one batch of rollouts; stragglers are cancelled and score 0. */
  rolloutBatchTimeoutSeconds: z.number().positive().default(3600),
  /** Score the seed on the whole validation set before the first round. */
  runInitialValidation: z.boolean().default(true),
  /** Wordings of the critique request; one is picked at random per call. */
  gradientInstructions: z
    .array(z.custom<GradientInstruction>(isInstruction, "must be { name, messages(input) }"))
    .min(1)
    .optional(),
  /** Wordings of the edit request; one is picked at random per call. */
  editInstructions: z
    .array(z.custom<EditInstruction>(isInstruction, "must be { name, messages(input) }"))
    .min(1)
    .optional(),
  /** Which prompt_template of the initial resources to optimise (default: the first one). */
  promptResourceName: z.string().min(1).optional(),
  /** Names the run's records and resources (`<runId>-v0`, ...); the same id resumes the run. */
  runId: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/, "letters, digits, _ . : - (at most 64)")
    .default("apo"),
  /** Continue a run found in the store under `runId` (else a stored run with that id is an error). */
  resume: z.boolean().default(true),
  /** Longest accepted candidate, characters (default: 10x the seed, at least 4000). */
  maxPromptChars: positiveInt.optional(),
  /** Longest rendering of one rollout's conversation in the critique request, characters. */
  maxExperimentChars: positiveInt.default(4000),
  /** Timeout of one HTTP attempt of an optimiser call. */
  callTimeoutMs: positiveInt.default(120_000),
  /** Retries of a rate-limited, failed or timed-out optimiser call (exponential backoff, Retry-After honoured). */
  maxRetries: z.number().int().min(0).max(10).default(4),
  /** Optimisation steps (train batch + critique + edit) run at the same time. */
  parallelSteps: positiveInt.default(4),
  /** Longest single wait on the store while rollouts run (completions wake APO earlier). */
  pollIntervalMs: z.number().positive().default(1000),
  /** Config of every rollout APO enqueues (timeouts, retries). */
  rolloutConfig: RolloutConfigSchema.partial().optional(),
  /** Random source for sampling parents, batches and instruction wordings (default Math.random). */
  random: z
    .custom<RandomSource>((v) => typeof v === "function", "must be a function () => number")
    .optional(),
});

export type ApoOptions = z.input<typeof ApoOptionsSchema>;
export type ResolvedApoOptions = z.output<typeof ApoOptionsSchema>;
