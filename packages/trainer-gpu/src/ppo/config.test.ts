import { InvalidArgumentError } from "@agl/core";
import { describe, expect, it } from "vitest";
import { miniBatchRows, parsePPOConfig } from "./config.js";

describe("PPO config", () => {
  it("fills VERL-shaped defaults from the measured recipe", () => {
    const c = parsePPOConfig({});
    expect(c.algorithm.adv_estimator).toBe("grpo");
    expect(c.data.train_batch_size).toBe(16);
    expect(c.actor_rollout_ref.rollout.n).toBe(8);
    expect(c.actor_rollout_ref.rollout.temperature).toBe(1);
    expect(c.actor_rollout_ref.actor.optim.lr).toBe(5e-4);
    expect(c.actor_rollout_ref.actor.clip_ratio_low).toBe(0.2);
    expect(c.actor_rollout_ref.actor.clip_ratio_high).toBe(0.2);
    expect(c.actor_rollout_ref.actor.grad_clip).toBe(1);
    expect(miniBatchRows(c)).toBe(128);
  });

  it("keeps explicit clip ratios and nested overrides", () => {
    const c = parsePPOConfig({
      actor_rollout_ref: { actor: { clip_ratio_high: 0.28, optim: { lr: 1e-3 } }, rollout: { n: 4 } },
      trainer: { test_freq: 2 },
    });
    expect(c.actor_rollout_ref.actor.clip_ratio_low).toBe(0.2);
    expect(c.actor_rollout_ref.actor.clip_ratio_high).toBe(0.28);
    expect(c.actor_rollout_ref.actor.optim.lr).toBe(1e-3);
    expect(c.actor_rollout_ref.actor.ppo_epochs).toBe(1);
    expect(c.trainer.test_freq).toBe(2);
  });

  it("rejects a misspelled key, naming its path", () => {
    let err: unknown;
    try {
      parsePPOConfig({ actor_rollout_ref: { actor: { optim: { learning_rate: 1 } } } });
    } catch (e) {
      err = e;
    }
    expect(InvalidArgumentError.isInstance(err)).toBe(true);
    expect(String((err as Error).message)).toMatch(/learning_rate/);
    expect((err as InvalidArgumentError).field).toMatch(/^config\.actor_rollout_ref\.actor\.optim/);
  });

  it("rejects bad values naming the field", () => {
    expect(() => parsePPOConfig({ algorithm: { adv_estimator: "ppo2" } })).toThrow(/adv_estimator/);
    expect(() => parsePPOConfig({ data: { train_batch_size: 0 } })).toThrow(/train_batch_size/);
  });
});
