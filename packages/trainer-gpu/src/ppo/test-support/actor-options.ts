import type { ActorUpdateOptions } from "../actor.js";
import { SeededRandom } from "../rng.js";

/** Test-only: actor-update options (plain PPO clip, no entropy/KL, lr 0.05) with `over` applied. */
export function actorOptions(over: Partial<ActorUpdateOptions> = {}): ActorUpdateOptions {
  return {
    miniBatchRows: 4,
    microBatchRows: 4,
    epochs: 1,
    shuffle: false,
    rng: new SeededRandom(1),
    padId: 0,
    clipLow: 0.2,
    clipHigh: 0.2,
    clipC: 3,
    aggMode: "token-mean",
    entropyCoeff: 0,
    useKlLoss: false,
    klLossCoef: 0,
    klLossType: "low_var_kl",
    gradClip: 1,
    lr: () => 0.05,
    ...over,
  };
}
