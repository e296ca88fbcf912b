import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_BASE, JobUsageError, parseJobArgs } from "./job-options.js";
import { MAIN_JOB, sftSettings } from "./settings.js";

describe("the job's command line", () => {
  it("defaults to the committed base; --base none is a fresh checkpoint with MAIN_JOB.sft", () => {
    expect(existsSync(join(DEFAULT_BASE, "model.safetensors"))).toBe(true);
    expect(parseJobArgs([])).toMatchObject({ base: DEFAULT_BASE, sftMaxSteps: 360, sftLr: 0.006 });
    expect(parseJobArgs(["--base", "none"])).toEqual({
      out: "calc-agent-run",
      steps: MAIN_JOB.grpo.steps,
      chainShare: MAIN_JOB.sft.chainShare,
      sftMaxSteps: MAIN_JOB.sft.maxSteps,
      sftLr: MAIN_JOB.sft.learningRate,
      sftShortSteps: 0,
      workers: 2,
      seed: 1,
    });
  });

  it("takes the from-base SFT settings with --base (after pnpm's --), unless flags override them", () => {
    const o = parseJobArgs(["--", "--base", "base", "--seed", "2"]);
    expect(o).toMatchObject({ base: "base", seed: 2, sftMaxSteps: 360, sftLr: 0.006 });
    expect(sftSettings(true)).toMatchObject({ ...MAIN_JOB.sft, ...MAIN_JOB.sftFromBase });
    expect(sftSettings(false)).toEqual(MAIN_JOB.sft);
    expect(parseJobArgs(["--base", "b", "--sft-lr", "3e-3", "--sft-max-steps", "160"])).toMatchObject({
      sftLr: 0.003,
      sftMaxSteps: 160,
    });
  });

  it("names every bad field in one typed error", () => {
    let error: unknown;
    try {
      parseJobArgs([
        "--steps",
        "0",
        "--chain-share",
        "1.5",
        "--sft-lr",
        "x",
        "--workers",
        "1.5",
        "--base",
        "",
      ]);
    } catch (e) {
      error = e;
    }
    expect(JobUsageError.isInstance(error)).toBe(true);
    const message = (error as Error).message;
    for (const field of ["--steps", "--chain-share", "--sft-lr", "--workers", "--base"])
      expect(message).toContain(field);
    expect(() => parseJobArgs(["--bogus", "1"])).toThrow(JobUsageError);
  });
});
