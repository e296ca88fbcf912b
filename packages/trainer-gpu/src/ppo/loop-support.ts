import type { CollectedRollout } from "./collect.js";
import { deriveSeed, SeededRandom } from "./rng.js";
import type { PPORun } from "./run-context.js";
import type { ValidationResult } from "./run-support.js";
import { mapStepRewards, ppoUpdate, type RewardMapper } from "./step.js";
import { validate } from "./validation.js";

/** What both training loops share (sync-loop.ts, async-loop.ts): the data order and the end of a step. */

/** The PPOOptions the loops act on. */
export interface LoopHooks {
  /** A rollout whose final reward is >= this counts as a success. */
  threshold: number;
  mapRewards?: RewardMapper;
  onStep?: (step: number, metrics: Record<string, number>) => void;
  stopAfterStep?: number;
}

/** The sample indices of step `step` (1-based) and its epoch: each epoch is one (seeded) shuffle. */
export function stepSamples<T>(run: PPORun<T>, step: number): { epoch: number; indices: number[] } {
  const { c, train, batchSize } = run;
  const perEpoch = Math.max(1, run.stepsPerEpoch);
  const epoch = Math.floor((step - 1) / perEpoch);
  const order = train.map((_, i) => i);
  if (c.data.shuffle) new SeededRandom(deriveSeed(c.trainer.seed, 7, epoch)).shuffle(order);
  const offset = ((step - 1) % perEpoch) * batchSize;
  return { epoch, indices: order.slice(offset, offset + batchSize) };
}

/** The rollout seed of (step, sample, repeat), the same whichever loop runs the step. */
export const trainSeed = <T>(run: PPORun<T>, step: number, sample: number, repeat: number) =>
  deriveSeed(run.c.trainer.seed, step, sample, repeat);

/** The PPO update of step `next` on `collected` (rewards mapped when asked); changes the weights in place. */
export async function updatePolicy<T>(
  run: PPORun<T>,
  collected: readonly CollectedRollout[],
  next: number,
  hooks: LoopHooks,
): Promise<Record<string, number>> {
  const { c } = run;
  const rng = new SeededRandom(deriveSeed(c.trainer.seed, next, 99));
  const rewardsOverride = hooks.mapRewards
    ? mapStepRewards(collected, c, hooks.mapRewards, {
        step: next,
        rng: new SeededRandom(deriveSeed(c.trainer.seed, next, 98)),
      })
    : undefined;
  if (run.policies)
    return run.policies.update(collected, c, run.models.padId, rng, run.totalSteps, rewardsOverride);
  return ppoUpdate(collected, c, run.models, rng, run.totalSteps, rewardsOverride);
}

/**
 * Point the proxy at the names the server serves the new version under (an external engine loads each
 * version as new LoRA adapters): the main model, and each policy of a multi-policy run.
 */
export function followServedModels<T>(run: PPORun<T>): void {
  const { server, proxy } = run;
  if (server.servedModel) proxy.setBackendModel(server.servedModel());
  if (run.policies && server.servedModels)
    for (const [p, route] of Object.entries(
      run.policies.proxyRoutes(proxy.options.model ?? "", server.servedModels()),
    ))
      proxy.setPolicyModel(p, route.model);
}

/**
 * After step `run.step` trained and its weights are served: log its metrics, validate every `test_freq`
 * steps and after the last, checkpoint every `save_freq` steps. True when the run should stop here.
 */
export async function endStep<T>(
  run: PPORun<T>,
  metrics: Record<string, number>,
  hooks: LoopHooks,
  validated: (result: ValidationResult | null) => void,
): Promise<boolean> {
  const { c, step } = run;
  run.log.record(step, metrics);
  hooks.onStep?.(step, metrics);
  const last = step === run.totalSteps;
  if (c.trainer.test_freq > 0 && (step % c.trainer.test_freq === 0 || last)) {
    validated(await validate(run, step, hooks.threshold));
  }
  if (c.trainer.save_freq > 0 && step % c.trainer.save_freq === 0) await run.save();
  return hooks.stopAfterStep !== undefined && step >= hooks.stopAfterStep;
}
