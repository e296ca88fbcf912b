import type { Logger } from "@agl/core";
import { DrainTimeoutError, type PauseOptions, type PauseState } from "@agl/proxy";
import type { CausalLM } from "../model/causal-lm.js";
import { loadLatestPPOCheckpoint } from "./checkpoint.js";
import type { CollectedRollout } from "./collect.js";
import { configDifferences, ignoredConfigKeys, type PPOConfig } from "./config.js";
import type { MetricsRecord } from "./metrics-log.js";
import type { AdamW } from "./optim.js";
import type { ValueHead } from "./value-head.js";

/**
 * Pieces of `PPO.run` kept out of algorithm.ts: the resume (restoring every stateful part and
 * comparing configs), the config warnings, and the proxy pause around a weight update.
 */

type WarnLogger = Pick<Logger, "warn" | "info">;

/** Say which well-known VERL keys the config sets that have no effect here (see VERL_IGNORED_KEYS). */
export function warnIgnoredKeys(input: unknown, logger: WarnLogger): string[] {
  const keys = ignoredConfigKeys(input);
  if (keys.length > 0) {
    logger.warn(`PPO: ignoring VERL config keys that have no effect in this trainer: ${keys.join(", ")}`);
  }
  return keys;
}

export interface ResumeTargets {
  model: CausalLM;
  reference: CausalLM | null;
  optimizer: AdamW;
  valueHead: ValueHead | null;
  config: PPOConfig;
  logger: WarnLogger;
}

/**
 * Restore the latest checkpoint under `root` into the given models and optimizers: actor, reference,
 * Adam state and, for GAE, the value head with its own optimizer — everything the next step depends
 * on. Warns, naming the keys, when the config differs from the one the checkpoint was written with
 * (that config is saved for exactly this comparison). Null when there is no checkpoint.
 */
export async function resumeFromCheckpoint(
  root: string,
  t: ResumeTargets,
): Promise<{ step: number; history: MetricsRecord[]; dir: string } | null> {
  const ckpt = await loadLatestPPOCheckpoint(root);
  if (!ckpt) return null;
  await ckpt.restoreInto(t.model, t.reference);
  t.optimizer.setState(ckpt.optimizer);
  if (t.valueHead) {
    if (ckpt.critic) t.valueHead.setState(ckpt.critic);
    else {
      t.logger.warn(
        `PPO: checkpoint ${ckpt.dir} has no critic (written before GAE was enabled, or by an older version); the value head starts fresh`,
      );
    }
  }
  const changed = configDifferences(ckpt.state.config, t.config);
  if (changed.length > 0) {
    t.logger.warn(
      `PPO: resuming from ${ckpt.dir} with a different config than it was saved with: ${changed.join(", ")}`,
    );
  }
  t.logger.info(`PPO: resumed from ${ckpt.dir} (step ${ckpt.state.step})`);
  return { step: ckpt.state.step, history: ckpt.state.history, dir: ckpt.dir };
}

/** How long to wait for calls still in flight at a pause before updating anyway. Stragglers belong to
 * rollouts already collected; the policy server drains its own generations before weights change, so
 * a stuck call must not stall training forever. */
export const PROXY_DRAIN_TIMEOUT_MS = 60_000;

export interface PausableProxy {
  pause(options?: PauseOptions): Promise<PauseState>;
  state(): PauseState;
}

/**
 * Pause the proxy for a weight update and wait until in-flight calls have finished and their spans are
 * written (Agent Lightning v1.0 polls /proxy/state until inflight == 0). Returns the metrics AGL logs.
 */
export async function pauseForUpdate(
  proxy: PausableProxy,
  logger: WarnLogger,
  drainTimeoutMs = PROXY_DRAIN_TIMEOUT_MS,
): Promise<{ proxy_inflight_at_pause: number; proxy_drain_seconds: number }> {
  // Read synchronously just before pausing: no call can enter in between on this event loop.
  const inflight = proxy.state().inflight;
  const t0 = performance.now();
  try {
    await proxy.pause({ drain: true, drainTimeoutMs, reason: "weight update" });
  } catch (error) {
    if (!(error instanceof DrainTimeoutError)) throw error;
    // Still paused: new calls are turned away; the stragglers finish on the old weights' server drain.
    logger.warn(`PPO: ${error.message} after ${drainTimeoutMs} ms; updating anyway`);
  }
  return { proxy_inflight_at_pause: inflight, proxy_drain_seconds: (performance.now() - t0) / 1000 };
}

export interface ValidationResult {
  reward: number;
  accuracy: number;
  n: number;
}

/** Mean reward and success rate of a set of rollouts as the agents earned them (failed ones count 0). */
export function summarize(rollouts: readonly CollectedRollout[], threshold: number): ValidationResult {
  const rewards = rollouts.map((r) => (r.status === "succeeded" ? (r.reward ?? 0) : 0));
  const n = rewards.length;
  return {
    reward: n ? rewards.reduce((a, b) => a + b, 0) / n : 0,
    accuracy: n ? rewards.filter((r) => r >= threshold).length / n : 0,
    n,
  };
}
