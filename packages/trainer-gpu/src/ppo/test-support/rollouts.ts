import type { CollectedRollout } from "../collect.js";

/** A succeeded rollout with one triplet (prompt `[1, 12, 13]`), as the PPO unit tests build them. */
export function oneTripletRollout(
  step: number,
  id: string,
  uid: string,
  reward: number,
  response: number[],
): CollectedRollout {
  return {
    rolloutId: `${step}-${id}`,
    uid,
    sampleIndex: 0,
    repeat: 0,
    status: "succeeded",
    reward,
    triplets: [
      { prompt: { token_ids: [1, 12, 13] }, response: { token_ids: response }, reward, metadata: {} },
    ],
  };
}
