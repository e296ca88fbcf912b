import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseTokenizer } from "./base.js";
import { MODEL_SHAPE, taskTokenizer, writeInitialCheckpoint } from "./checkpoint.js";
import {
  checkFromTokenizer,
  learningRateAt,
  PretrainUsageError,
  parsePretrainArgs,
} from "./pretrain-options.js";

describe("pretrain-base command line", () => {
  it("has defaults and reads numbers, --from and --decay (after pnpm's --)", () => {
    const o = parsePretrainArgs([
      "--",
      "--from",
      "base",
      "--decay",
      "cosine",
      "--lr",
      "3e-3",
      "--free-text",
      "0.4",
    ]);
    expect(o).toMatchObject({
      from: "base",
      decay: "cosine",
      lr: 0.003,
      "free-text": 0.4,
      steps: 2000,
      every: 50,
    });
    expect(parsePretrainArgs([])).toMatchObject({
      decay: "none",
      "free-text": 0,
      from: undefined,
      out: "base",
    });
  });

  it("refuses bad values with a typed error naming each option", () => {
    const fails = (args: string[], pattern: RegExp) => {
      let error: unknown;
      try {
        parsePretrainArgs(args);
      } catch (e) {
        error = e;
      }
      expect(PretrainUsageError.isInstance(error)).toBe(true);
      expect((error as Error).message).toMatch(pattern);
    };
    fails(["--decay", "linear"], /--decay must be "cosine" or "none", got "linear"/);
    fails(
      ["--steps", "0", "--lr", "fast"],
      /--steps must be an integer >= 1.*--lr must be a positive number/,
    );
    fails(["--free-text", "1.5"], /--free-text must be a number from 0 to 1/);
    fails(["--every", ""], /--every must be/);
    fails(["--from", ""], /--from must not be empty/);
    fails(["--bogus", "1"], /bogus/);
  });
});

describe("learning-rate schedule", () => {
  const o = { lr: 0.01, steps: 101, warmup: 0, decay: "cosine" as const };
  it("cosine falls from lr to lr/10 over the steps, monotonically", () => {
    expect(learningRateAt(0, o)).toBeCloseTo(0.01, 12);
    expect(learningRateAt(50, o)).toBeCloseTo(0.0055, 12);
    expect(learningRateAt(100, o)).toBeCloseTo(0.001, 12);
    for (let s = 1; s <= 100; s++) expect(learningRateAt(s, o)).toBeLessThan(learningRateAt(s - 1, o));
  });
  it("none keeps lr; warm-up rises linearly first", () => {
    expect(learningRateAt(70, { ...o, decay: "none" })).toBe(0.01);
    expect(learningRateAt(0, { ...o, warmup: 10, decay: "none" })).toBeCloseTo(0.001, 12);
    expect(learningRateAt(4, { ...o, warmup: 10, decay: "none" })).toBeCloseTo(0.005, 12);
    expect(learningRateAt(9, { ...o, warmup: 10, decay: "none" })).toBe(0.01);
  });
});

describe("--from", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "calc-pretrain-from-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("accepts a checkpoint with the base's tokenizer and refuses one with another or none", async () => {
    const tok = baseTokenizer();
    await writeInitialCheckpoint(join(dir, "base"), 1, MODEL_SHAPE, { tokenizer: tok });
    await expect(checkFromTokenizer(join(dir, "base"), tok)).resolves.toBeUndefined();
    // The job's own checkpoint: the tokenizer trimmed to the task only.
    await writeInitialCheckpoint(join(dir, "task"), 1, MODEL_SHAPE, { tokenizer: taskTokenizer() });
    await expect(checkFromTokenizer(join(dir, "task"), tok)).rejects.toThrow(/tokenizer is not the base's/);
    await expect(checkFromTokenizer(join(dir, "missing"), tok)).rejects.toThrow(/cannot read tokenizer.json/);
  }, 300_000);
});
