import { fileURLToPath } from "node:url";
import {
  type Check,
  checkNumbers,
  INT0,
  INT1,
  POSITIVE,
  parseCliArgs,
  SHARE,
  UsageError,
} from "./cli-checks.js";
import { MAIN_JOB, sftSettings } from "./settings.js";

/** The command line of src/main.ts, checked. SFT defaults depend on `--base` (`sftSettings`). */
export interface JobOptions {
  out: string;
  /** GRPO steps (a fixed amount of work: the run never stops on the clock). */
  steps: number;
  chainShare: number;
  sftMaxSteps: number;
  sftLr: number;
  sftShortSteps: number;
  /** Worker threads for generation and gradients; 0 = all in this thread (same numbers). */
  workers: number;
  seed: number;
  /** A pretrained checkpoint folder to start from (default `DEFAULT_BASE`); undefined: fresh weights (`--base none`). */
  base?: string;
}

/**
 * The committed pretrained base (`base/`, beside `src/` and `dist/`): the job's default start since session 8,
 * where SFT from it measured far better than from fresh weights (README).
 */
export const DEFAULT_BASE = fileURLToPath(new URL("../base", import.meta.url));

/** A bad command line: the job prints it and exits with status 2. */
export class JobUsageError extends UsageError {
  override name = "JobUsageError";
}

const CHECKS: Record<string, Check> = {
  steps: INT1,
  "chain-share": SHARE,
  "sft-max-steps": INT1,
  "sft-lr": POSITIVE,
  "sft-short-steps": INT0,
  workers: INT0,
  seed: INT0,
};

/** Parse and check the job's arguments (after `--`, if pnpm passed one). */
export function parseJobArgs(argv: readonly string[]): JobOptions {
  const values = parseCliArgs(
    argv,
    {
      out: { type: "string", default: "calc-agent-run" },
      steps: { type: "string", default: String(MAIN_JOB.grpo.steps) },
      "chain-share": { type: "string", default: String(MAIN_JOB.sft.chainShare) },
      "sft-max-steps": { type: "string" },
      "sft-lr": { type: "string" },
      "sft-short-steps": { type: "string", default: String(MAIN_JOB.sft.shortSteps) },
      workers: { type: "string", default: "2" },
      seed: { type: "string", default: "1" },
      base: { type: "string", default: DEFAULT_BASE },
    },
    (message) => new JobUsageError(message),
  );
  const base = values.base === "none" ? undefined : values.base;
  const sft = sftSettings(base !== undefined);
  values["sft-max-steps"] ??= String(sft.maxSteps);
  values["sft-lr"] ??= String(sft.learningRate);
  const { numbers: n, problems } = checkNumbers(values, CHECKS);
  if (values.out === "") problems.push("--out must not be empty");
  if (base === "") problems.push('--base must be a folder or "none"');
  if (problems.length) throw new JobUsageError(problems.join("; "));
  return {
    out: values.out!,
    steps: n.steps!,
    chainShare: n["chain-share"]!,
    sftMaxSteps: n["sft-max-steps"]!,
    sftLr: n["sft-lr"]!,
    sftShortSteps: n["sft-short-steps"]!,
    workers: n.workers!,
    seed: n.seed!,
    ...(base === undefined ? {} : { base }),
  };
}
