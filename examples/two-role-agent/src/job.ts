import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { exportPeftAdapter, exportPretrained, loadPretrainedPolicy } from "@agl/trainer-gpu";
import { writeTwoRoleCheckpoint } from "./checkpoint.js";
import {
  type Arm,
  addArmAdapters,
  describeHeldOut,
  type HeldOut,
  heldOut,
  trainArm,
  warmUp,
} from "./experiment.js";
import { makeSplits } from "./task.js";

/**
 * The whole job for one seed, what `main.ts` runs and the bench (bench/two-role.ts) runs once per seed: a
 * fresh Qwen3 checkpoint, the format-only warm-up (once: every arm starts from the same weights, exported
 * to `<out>/warm`), then each arm from those weights — its adapters trained with GRPO through the proxy,
 * scored on the test split, each adapter exported as a PEFT folder `<out>/<arm>/peft/<adapter>`.
 */

export interface ArmResult {
  test: HeldOut;
  seconds: number;
  trainedTokens: number;
  /** Per GRPO step: each role's mean training reward and the rows trained. */
  curve: Array<{ step: number; writer: number; checker: number; rows: number }>;
  /** The adapters' A/B matrices (the base is frozen). */
  trainableParameters: number;
  /** Adapter → its exported PEFT folder. */
  peft: Record<string, string>;
}

export interface SeedResult {
  seed: number;
  /** The warm-up checkpoint (a Hugging Face folder: the base every adapter applies to). */
  base: string;
  warmup: { test: HeldOut; loss: number; seconds: number };
  arms: Partial<Record<Arm, ArmResult>>;
  seconds: number;
  loadAverageAtStart: number;
}

export async function runJob(o: {
  seed: number;
  out: string;
  arms: readonly Arm[];
  log: (line: string) => void;
  /** Write `<out>/result.json` after every stage. */
  saveResult?: boolean;
  /** Reuse the warm-up a previous run of the same seed left in `out` (checkpoint and scores). */
  resume?: boolean;
}): Promise<SeedResult> {
  const t0 = performance.now();
  const { seed, out } = o;
  mkdirSync(out, { recursive: true });
  const splits = makeSplits();
  const warm = join(out, "warm");
  const result: SeedResult = {
    seed,
    base: warm,
    warmup: undefined as unknown as SeedResult["warmup"],
    arms: {},
    seconds: 0,
    loadAverageAtStart: loadavg()[0]!,
  };
  const save = () => {
    result.seconds = (performance.now() - t0) / 1000;
    if (o.saveResult) writeFileSync(join(out, "result.json"), `${JSON.stringify(result, null, 2)}\n`);
  };
  const testSeed = seed * 31 + 5;

  const previous = join(out, "result.json");
  const done = existsSync(previous) ? (JSON.parse(readFileSync(previous, "utf8")) as SeedResult) : null;
  if (o.resume && done?.warmup && existsSync(join(warm, "model.safetensors"))) {
    // The warm-up is a fixed amount of work for a seed: a resumed job reuses it (and its test scores).
    result.warmup = done.warmup;
    o.log(`warm-up reused from ${warm}`);
  } else {
    const initial = join(out, "initial");
    await writeTwoRoleCheckpoint(initial, seed);
    const fresh = await loadPretrainedPolicy(initial);
    o.log(
      `fresh ${fresh.modelName}: ${fresh.model.parameterCount.toLocaleString()} parameters, ${fresh.tokenizer.vocabSize} tokens`,
    );
    const w = await warmUp(fresh, splits, seed);
    await exportPretrained(fresh.model, warm);
    const warmTest = await heldOut(fresh, splits.test, { writer: "base", checker: "base" }, testSeed);
    fresh.model.dispose();
    result.warmup = { test: warmTest, loss: w.loss, seconds: w.seconds };
    o.log(`warm-up: loss ${w.loss.toFixed(3)}; test ${describeHeldOut(warmTest)}`);
  }
  save();

  for (const arm of o.arms) {
    const policy = await loadPretrainedPolicy(warm);
    const models = addArmAdapters(policy, arm, seed);
    const trainableParameters = policy.model.trainableVariables.reduce((n, v) => n + v.size, 0);
    const curve: ArmResult["curve"] = [];
    let trainedTokens = 0;
    const run = await trainArm(policy, splits.train, {
      arm,
      seed,
      out: join(out, arm),
      onStep: (step, m) => {
        trainedTokens += m["training/n_tokens"] ?? 0;
        const point = {
          step,
          writer: m["policy/writer/reward_mean"] ?? Number.NaN,
          checker: m["policy/checker/reward_mean"] ?? Number.NaN,
          rows: m["agent_mode/n_sample_to_train"] ?? 0,
        };
        curve.push(point);
        o.log(
          `${arm} GRPO step ${step}: training reward ${point.writer.toFixed(3)}, ${point.rows} calls trained`,
        );
      },
    });
    const test = await heldOut(policy, splits.test, models, testSeed);
    const peft: Record<string, string> = {};
    for (const adapter of new Set(Object.values(models))) {
      peft[adapter] = join(out, arm, "peft", adapter);
      await exportPeftAdapter(policy.model, peft[adapter], { adapter, baseModelNameOrPath: warm });
    }
    policy.model.dispose();
    result.arms[arm] = { test, seconds: run.seconds, trainedTokens, curve, trainableParameters, peft };
    o.log(
      `${arm}: ${run.result.stepsCompleted} GRPO steps in ${run.seconds.toFixed(0)} s; test ${describeHeldOut(test)}`,
    );
    save();
  }
  save();
  return result;
}
