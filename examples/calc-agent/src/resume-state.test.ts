import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadWarmStart, rlSecondsSoFar, saveWarmStart, WARM_START_FILE } from "./resume-state.js";

const dir = mkdtempSync(join(tmpdir(), "calc-resume-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ev = (accuracy: number) => ({ accuracy, toolUse: 0.1, toolSuccess: 0.5, n: 100 });

describe("calc-agent resume state", () => {
  it("round-trips the warm-start evaluation and checks the seed", () => {
    const record = { seed: 3, seconds: 281.5, greedy: ev(0), sampled: ev(0.04) };
    expect(loadWarmStart(dir, 3)).toBeNull();
    saveWarmStart(dir, record);
    expect(loadWarmStart(dir, 3)).toEqual(record);
    expect(() => loadWarmStart(dir, 4)).toThrow(/--seed 3, not 4/);
    writeFileSync(join(dir, WARM_START_FILE), JSON.stringify({ seed: 3, seconds: 1 }));
    expect(() => loadWarmStart(dir, 3)).toThrow(/not a warm-start record/);
  });

  it("sums the RL time a checkpoint's history records (steps and validations)", () => {
    const history = [
      { step: 0, metrics: { "timing_s/testing": 4 } },
      { step: 1, metrics: { "timing_s/step": 5.5, "training/reward": 0.1 } },
      { step: 2, metrics: { "timing_s/step": 6.5 } },
      { step: 2, metrics: { "timing_s/testing": 3 } },
    ];
    expect(rlSecondsSoFar(history)).toBe(19);
    expect(rlSecondsSoFar([])).toBe(0);
  });
});
