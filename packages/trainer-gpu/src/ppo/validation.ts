import { collectRollouts } from "./collect.js";
import { deriveSeed } from "./rng.js";
import type { PPORun } from "./run-context.js";
import { summarize, type ValidationResult } from "./run-support.js";

/**
 * One validation pass at `atStep`: `val_batch_size` samples x `val_kwargs.n` rollouts on the "ppo-val"
 * resources, their mean reward and accuracy logged as `val/*`. Null without a validation set.
 */
export async function validate<T>(
  run: PPORun<T>,
  atStep: number,
  threshold: number,
): Promise<ValidationResult | null> {
  const { c, val, context, proxy } = run;
  const { logger } = context;
  if (val.length === 0) return null;
  const rollout = c.actor_rollout_ref.rollout;
  const t0 = performance.now();
  const count = Math.min(c.data.val_batch_size ?? val.length, val.length);
  const total = count * rollout.val_kwargs.n;
  logger.info(`PPO: validation at step ${atStep}: ${total} rollouts`);
  let lastLog = t0;
  const collected = await collectRollouts({
    store: context.store,
    adapter: run.adapter,
    samples: val.slice(0, count).map((task, index) => ({ index, task })),
    n: rollout.val_kwargs.n,
    mode: "val",
    resourcesId: "ppo-val",
    timeoutSeconds: rollout.timeout_seconds,
    pollSeconds: c.agentlightning.poll_interval_seconds,
    seedOf: (i, r) => deriveSeed(c.trainer.seed, 1_000_003, atStep, i, r),
    dataIdOf: (i) => `val-${atStep}-${i}`,
    signal: run.stop.signal,
    beforeAdapt: () => proxy.flush(),
    // A slow agent (or one generating to the context limit) must show up in the log, not as silence.
    onProgress: (ended, all) => {
      const now = performance.now();
      if (ended < all && now - lastLog < 10_000) return;
      lastLog = now;
      logger.info(
        `PPO: validation at step ${atStep}: ${ended}/${all} rollouts ended (${((now - t0) / 1000).toFixed(1)} s)`,
      );
    },
  });
  const result = summarize(collected, threshold);
  run.log.record(atStep, {
    "val/reward": result.reward,
    "val/accuracy": result.accuracy,
    "val/n_rollouts": result.n,
    "timing_s/testing": (performance.now() - t0) / 1000,
  });
  return result;
}
