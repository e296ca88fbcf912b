import { describe, expect, it } from "vitest";
import type { RolloutContext } from "../agent/types.js";
import type { Logger } from "../logger.js";
import { Trainer } from "./trainer.js";

function capture(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  return {
    warnings,
    logger: { debug() {}, info() {}, warn: (m: string) => void warnings.push(m), error() {} },
  };
}

describe("trainer.dev() and fit() first contact", () => {
  it("dev() prints a compact summary table of the rollouts", async () => {
    const printed: string[] = [];
    const { logger } = capture();
    const trainer = new Trainer({ logger, devReport: (text) => printed.push(text) });
    const { result } = await trainer.dev(
      async (task: number) => {
        if (task === 3) throw new Error("three is bad");
        return task / 2;
      },
      [1, 2, 3],
    );
    // Typed from the algorithm (a Baseline): no cast needed to read the summary.
    expect(result.succeeded).toBe(2);
    expect(printed).toHaveLength(1);
    const lines = printed[0]!.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^agl dev: 3 rollouts, 2 succeeded, 1 failed, mean reward 0\.750, [\d.]+ s$/);
    expect(lines[1]).toMatch(/#\s+status\s+reward\s+attempts\s+spans\s+input/);
    // spans: the agent.rollout span and the reward.
    expect(lines[2]).toMatch(/1\s+succeeded\s+0\.5\s+1\s+2\s+1$/);
    expect(lines[4]).toMatch(/3\s+failed\s+-\s+1\s+\d+\s+3 {2}error: three is bad$/);
  });

  it("a hung agent no longer hangs dev(): the default deadline ends it and the table says so", async () => {
    const printed: string[] = [];
    const trainer = new Trainer({
      logger: capture().logger,
      devTimeoutSeconds: 0.1,
      gracePeriodMs: 20,
      devReport: (text) => printed.push(text),
    });
    const { result } = await trainer.dev(
      async (task: number, { signal }: RolloutContext) => {
        if (task === 1) await new Promise(() => {});
        signal.throwIfAborted();
        return 1;
      },
      [1, 2],
    );
    expect(result.rollouts.map((r) => r.status)).toEqual(["failed", "succeeded"]);
    expect(printed[0]).toContain("1 failed");
  });

  it("fit() without an algorithm warns that nothing is trained", async () => {
    const { logger, warnings } = capture();
    await new Trainer({ logger }).fit(async () => 1, [1]);
    expect(warnings.some((w) => w.includes("without an algorithm") && w.includes("nothing is trained"))).toBe(
      true,
    );
    const quiet = capture();
    await new Trainer({ logger: quiet.logger, algorithm: { run: async () => 0 } }).fit(async () => 1, [1]);
    expect(quiet.warnings.filter((w) => w.includes("without an algorithm"))).toEqual([]);
  });
});
