/**
 * Compile-time checks (run by `pnpm typecheck`, never executed): `fit()`/`dev()` results are typed from
 * the configured algorithm without naming the summary type.
 */
import type { Algorithm } from "./algorithm.js";
import { Baseline, type BaselineSummary } from "./baseline.js";
import { Trainer } from "./trainer.js";

declare const agent: (task: number) => Promise<number>;
const slow: Algorithm<number, { loss: number }> = { run: async () => ({ loss: 1 }) };
const fast = {
  fast: true as const,
  async run() {
    return { score: 2 };
  },
};

export async function typedResults(): Promise<void> {
  const plain: BaselineSummary = (await new Trainer().dev(agent, [1])).result;
  const plainFit: BaselineSummary = (await new Trainer({}).fit(agent, [1])).result;
  const trained: { loss: number } = (await new Trainer({ algorithm: slow }).fit(agent, [1])).result;
  // dev() of a non-fast algorithm runs a Baseline; of a fast one, the algorithm itself.
  const devSlow: BaselineSummary = (await new Trainer({ algorithm: slow }).dev(agent, [1])).result;
  const devFast: { score: number } = (await new Trainer({ algorithm: fast }).dev(agent, [1])).result;
  const baseline: BaselineSummary = (await new Trainer({ algorithm: new Baseline() }).dev(agent, [1])).result;
  // @ts-expect-error the result of a loss-reporting algorithm is not a BaselineSummary
  const wrong: BaselineSummary = (await new Trainer({ algorithm: slow }).fit(agent, [1])).result;
  void [plain, plainFit, trained, devSlow, devFast, baseline, wrong];
}
