import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { checkNumbers, INT0, INT1, POSITIVE, parseCliArgs, SHARE, UsageError } from "./cli-checks.js";
import type { TrimmedTokenizer } from "./qwen-tokenizer.js";

/** The command line of src/pretrain-base.ts, checked. */
export interface PretrainOptions {
  out: string;
  steps: number;
  every: number;
  "stop-at": number;
  seed: number;
  lr: number;
  warmup: number;
  batch: number;
  micro: number;
  corpus: number;
  "free-text": number;
  from?: string;
  decay: "cosine" | "none";
}

const NUMBERS = {
  steps: INT1,
  every: INT1,
  "stop-at": POSITIVE,
  seed: INT0,
  lr: POSITIVE,
  warmup: INT0,
  batch: INT1,
  micro: INT1,
  corpus: INT1,
  "free-text": SHARE,
} as const;

/** A bad command line or `--from` folder: the script prints it and exits with status 2. */
export class PretrainUsageError extends UsageError {
  override name = "PretrainUsageError";
}

/** Parse and check the arguments (after `--`, if pnpm passed one). */
export function parsePretrainArgs(argv: readonly string[]): PretrainOptions {
  const values = parseCliArgs(
    argv,
    {
      out: { type: "string", default: "base" },
      steps: { type: "string", default: "2000" },
      every: { type: "string", default: "50" },
      "stop-at": { type: "string", default: "1.01" },
      seed: { type: "string", default: "1" },
      lr: { type: "string", default: "0.01" },
      warmup: { type: "string", default: "50" },
      batch: { type: "string", default: "32" },
      /** Rows per micro-batch: length-balanced, so short rows are not padded to a tools block's length. */
      micro: { type: "string", default: "8" },
      /** Training chats (drawn once; held-out chats come from another seed). */
      corpus: { type: "string", default: "3000" },
      /** Share of the corpus that is free-text chats of two calls (src/base-corpus-free-text.ts). */
      "free-text": { type: "string", default: "0" },
      /** Start from this checkpoint (Hugging Face layout, the base's tokenizer) instead of fresh weights. */
      from: { type: "string" },
      /** "cosine": the rate falls from --lr to --lr/10 over --steps; "none": it stays at --lr. */
      decay: { type: "string", default: "none" },
    },
    (message) => new PretrainUsageError(message),
  );
  const { numbers, problems } = checkNumbers(values, NUMBERS);
  const decay = values.decay!;
  if (decay !== "cosine" && decay !== "none")
    problems.push(`--decay must be "cosine" or "none", got "${decay}"`);
  if (values.out === "") problems.push("--out must not be empty");
  if (values.from === "") problems.push("--from must not be empty");
  if (problems.length) throw new PretrainUsageError(problems.join("; "));
  return {
    ...(numbers as Omit<PretrainOptions, "out" | "from" | "decay">),
    out: values.out!,
    from: values.from,
    decay: decay as PretrainOptions["decay"],
  };
}

/**
 * The learning rate of step `step` (0-based) of a run of `steps`: a linear warm-up over `warmup` steps,
 * then `lr` ("none") or a cosine from `lr` down to `lr / 10` at the last step ("cosine"). A run resumed
 * with `--from` is a new run: its schedule starts again at `lr`.
 */
export function learningRateAt(
  step: number,
  o: Pick<PretrainOptions, "lr" | "steps" | "warmup" | "decay">,
): number {
  const rise = o.warmup > 0 ? Math.min(1, (step + 1) / o.warmup) : 1;
  if (o.decay === "none") return o.lr * rise;
  const t = o.steps > 1 ? Math.min(1, step / (o.steps - 1)) : 1;
  return o.lr * rise * (0.1 + 0.45 * (1 + Math.cos(Math.PI * t)));
}

/**
 * Refuse a `--from` checkpoint whose tokenizer is not `expected` (the base's): its embedding rows would
 * mean other tokens than the corpus is encoded with.
 */
export async function checkFromTokenizer(dir: string, expected: TrimmedTokenizer): Promise<void> {
  let json: TrimmedTokenizer["tokenizerJson"];
  try {
    json = JSON.parse(await readFile(join(dir, "tokenizer.json"), "utf8"));
  } catch (e) {
    throw new PretrainUsageError(`--from ${dir}: cannot read tokenizer.json (${(e as Error).message})`);
  }
  const want = expected.tokenizerJson;
  const same =
    isDeepStrictEqual(json.model?.vocab, want.model.vocab) &&
    isDeepStrictEqual(
      (json.model?.merges ?? []).map((m) => (typeof m === "string" ? m.split(" ") : m)),
      want.model.merges.map((m) => (typeof m === "string" ? m.split(" ") : m)),
    ) &&
    isDeepStrictEqual(
      (json.added_tokens ?? []).map((t) => [t.id, t.content]),
      want.added_tokens.map((t) => [t.id, t.content]),
    );
  if (!same)
    throw new PretrainUsageError(
      `--from ${dir}: its tokenizer is not the base's (src/base.ts baseTokenizer(): ${Object.keys(want.model.vocab).length} tokens, got ${Object.keys(json.model?.vocab ?? {}).length}); pretrain from a checkpoint this script wrote`,
    );
}
