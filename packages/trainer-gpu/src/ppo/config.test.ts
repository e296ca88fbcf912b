import { InvalidArgumentError } from "@agl/core";
import { describe, expect, it } from "vitest";
import { configDifferences, ignoredConfigKeys, miniBatchRows, parsePPOConfig } from "./config.js";

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

  it("partial_rollouts: off by default; on needs max_staleness > 0, named in the error", () => {
    expect(parsePPOConfig({}).actor_rollout_ref.rollout.partial_rollouts).toBe(false);
    const bad = () => parsePPOConfig({ actor_rollout_ref: { rollout: { partial_rollouts: true } } });
    expect(bad).toThrow(InvalidArgumentError);
    expect(bad).toThrow(/partial_rollouts.*max_staleness > 0/);
    const ok = parsePPOConfig({
      actor_rollout_ref: {
        rollout: { max_staleness: 1, partial_rollouts: true },
        actor: { tis_imp_ratio_cap: 2 },
      },
    });
    expect(ok.actor_rollout_ref.rollout.partial_rollouts).toBe(true);
  });

  it("max_staleness: 0 by default; k > 0 needs the truncated-IS cap, named in the error", () => {
    expect(parsePPOConfig({}).actor_rollout_ref.rollout.max_staleness).toBe(0);
    const bad = () => parsePPOConfig({ actor_rollout_ref: { rollout: { max_staleness: 1 } } });
    expect(bad).toThrow(InvalidArgumentError);
    expect(bad).toThrow(/tis_imp_ratio_cap/);
    expect(() => parsePPOConfig({ actor_rollout_ref: { rollout: { max_staleness: -1 } } })).toThrow(
      /max_staleness/,
    );
    const ok = parsePPOConfig({
      actor_rollout_ref: { rollout: { max_staleness: 2 }, actor: { tis_imp_ratio_cap: 2 } },
    });
    expect(ok.actor_rollout_ref.rollout.max_staleness).toBe(2);
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

  it("accepts VERL's loss_agg_mode names and both per-rollout spellings", () => {
    const mode = (m: string) =>
      parsePPOConfig({ actor_rollout_ref: { actor: { loss_agg_mode: m as never } } }).actor_rollout_ref.actor
        .loss_agg_mode;
    for (const m of ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]) {
      expect(mode(m)).toBe(m);
    }
    expect(mode("per_rollout_mean")).toBe("per_rollout_mean");
    expect(mode("per-rollout-mean")).toBe("per_rollout_mean");
    expect(() => mode("seq-mean")).toThrow(/loss_agg_mode/);
  });

  it("loads a VERL config's no-op sections and keys, lists them, and still rejects misspellings", () => {
    const verl = {
      data: { train_files: "x.parquet", train_batch_size: 8, truncation: "error" },
      actor_rollout_ref: {
        model: { path: "Qwen/Qwen2.5-0.5B", use_remove_padding: true, enable_gradient_checkpointing: true },
        ref: { log_prob_micro_batch_size_per_gpu: 8, fsdp_config: { param_offload: true } },
        hybrid_engine: true,
        actor: { strategy: "fsdp", use_dynamic_bsz: false, optim: { lr: 1e-6, total_training_steps: -1 } },
        rollout: { name: "vllm", gpu_memory_utilization: 0.6, n: 4, tensor_model_parallel_size: 1 },
      },
      critic: { model: { path: "x" }, optim: { lr: 1e-5, weight_decay: 0.01 } },
      trainer: { n_gpus_per_node: 1, nnodes: 1, total_epochs: 2 },
      reward_model: { enable: false },
    };
    const c = parsePPOConfig(verl);
    expect(c.data.train_batch_size).toBe(8);
    expect(c.actor_rollout_ref.rollout.n).toBe(4);
    expect(c.actor_rollout_ref.actor.optim.lr).toBe(1e-6);
    expect(c.critic.optim.lr).toBe(1e-5);
    expect(ignoredConfigKeys(verl).sort()).toEqual(
      [
        "reward_model",
        "data.train_files",
        "data.truncation",
        "actor_rollout_ref.model",
        "actor_rollout_ref.ref",
        "actor_rollout_ref.hybrid_engine",
        "actor_rollout_ref.actor.strategy",
        "actor_rollout_ref.actor.use_dynamic_bsz",
        "actor_rollout_ref.actor.optim.total_training_steps",
        "actor_rollout_ref.rollout.name",
        "actor_rollout_ref.rollout.gpu_memory_utilization",
        "actor_rollout_ref.rollout.tensor_model_parallel_size",
        "critic.model",
        "critic.optim.weight_decay",
        "trainer.n_gpus_per_node",
        "trainer.nnodes",
      ].sort(),
    );
    expect(ignoredConfigKeys({ data: { train_batch_size: 2 } })).toEqual([]);
    // misspellings next to the accepted sections are still errors naming the key
    expect(() => parsePPOConfig({ actor_rollout_ref: { modle: { path: "x" } } })).toThrow(/modle/);
    expect(() => parsePPOConfig({ actor_rollout_ref: { rollout: { gpu_memory_utilisation: 0.5 } } })).toThrow(
      /gpu_memory_utilisation/,
    );
    expect(() => parsePPOConfig({ trainer: { n_gpu_per_node: 1 } })).toThrow(/n_gpu_per_node/);
  });

  it("names the keys where a saved config differs from the current one", () => {
    const saved = JSON.parse(JSON.stringify(parsePPOConfig({ trainer: { seed: 1 } })));
    const current = parsePPOConfig({
      trainer: { seed: 2, logger: ["jsonl"] },
      actor_rollout_ref: { actor: { optim: { lr: 1e-3 } } },
    });
    expect(configDifferences(saved, current)).toEqual([
      "actor_rollout_ref.actor.optim.lr",
      "trainer.logger",
      "trainer.seed",
    ]);
    expect(configDifferences(saved, parsePPOConfig({ trainer: { seed: 1 } }))).toEqual([]);
    expect(configDifferences({ a: 1 }, { a: 1, b: { c: 2 } })).toEqual(["b"]);
    expect(configDifferences(undefined, { a: 1 })).toEqual(["(whole config)"]);
  });
});
