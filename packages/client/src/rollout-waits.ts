/**
 * waitForRollouts as a long-poll: Agent Lightning's POST /waits/rollouts waits server-side for at
 * most one chunk, so the client asks again until every id is terminal or its own deadline passes.
 * Kept apart from store-client.ts because the loop, not the route, is the part with logic in it.
 */
import { AbortedError, type Rollout, type WaitForRolloutsOptions } from "@agl/core";
import { RolloutList, trustedRollouts } from "./http/wire.js";
import type { StoreCaller } from "./store-call.js";

/** Set by the agl store server on POST /waits/rollouts when the wait ended before its cap. */
const WAIT_COMPLETE_HEADER = "x-agl-wait-complete";

/** See LightningStoreClient.waitForRollouts; `waitChunkSeconds` is the longest single server-side wait. */
export async function waitForRollouts(
  caller: StoreCaller,
  rolloutIds: string[],
  options: WaitForRolloutsOptions,
  waitChunkSeconds: number,
): Promise<Rollout[]> {
  const { signal } = options;
  AbortedError.throwIfAborted(signal, "waitForRollouts");
  const timeout = options.timeoutSeconds === undefined ? null : options.timeoutSeconds;
  const done = new Map<string, Rollout>();
  const remaining = () => [...new Set(rolloutIds)].filter((id) => !done.has(id));
  const deadline = timeout === null ? Number.POSITIVE_INFINITY : Date.now() + Math.max(0, timeout) * 1000;
  for (;;) {
    const ids = remaining();
    if (ids.length === 0) break;
    const left = (deadline - Date.now()) / 1000;
    const chunk = timeout !== null && timeout <= 0 ? 0 : Math.max(0, Math.min(waitChunkSeconds, left));
    // The server says whether its wait ended on its own (every known id finished; unknown ids
    // never finish) rather than at its cap, so unknown ids do not keep us polling to the deadline.
    let complete = false;
    const asked = performance.now();
    const finished = await caller.call(
      RolloutList,
      "post",
      "waits/rollouts",
      {
        json: { rollout_ids: ids, timeout: chunk },
        timeoutMs: chunk * 1000 + 30_000,
        signal,
        onResponse: (res) => {
          complete = res.header(WAIT_COMPLETE_HEADER) === "1";
        },
      },
      trustedRollouts,
    );
    for (const rollout of finished) done.set(rollout.rollout_id, rollout);
    // Earlier agl servers also flagged a wait that merely ran to the chunk as complete;
    // only an answer before the chunk ran out proves every known id finished.
    const early = (performance.now() - asked) / 1000 < chunk - 0.05;
    if ((complete && early) || chunk === 0 || Date.now() >= deadline) break;
  }
  return [...done.values()];
}
