/**
 * two-role-agent: a writer and a checker over one tiny Qwen3-architecture base, each role trained as its
 * own LoRA adapter through the LLM proxy, then exported for vLLM.
 *
 *   1. write a fresh Qwen3 checkpoint (Hugging Face layout, the real Qwen3 tokenizer trimmed to the task);
 *   2. a short format-only SFT warm-up of the whole model (`<out>/warm`, the base the adapters apply to);
 *   3. GRPO on LoRA adapters through the real stack (core Trainer, in-process runner, LLM proxy routing each
 *      role's model name to its adapter in PolicyServer) — an adapter per role, or one shared adapter
 *      (`--arms shared`), or both, from the same warm-up;
 *   4. test accuracy per role, each adapter exported as a PEFT folder, and the `vllm serve` command.
 */
import { rmSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { selectBackend } from "@agl/trainer-gpu";
import type { Arm } from "./experiment.js";
import { runJob } from "./job.js";
import { SETTINGS } from "./settings.js";

const argv = process.argv.slice(2);
if (argv[0] === "--") argv.shift();
const { values: args } = parseArgs({
  args: argv,
  options: {
    out: { type: "string", default: "two-role-run" },
    /** "per-role", "shared" or "shared,per-role" (the comparison, from one warm-up). */
    arms: { type: "string", default: "per-role" },
    seed: { type: "string", default: "1" },
  },
});

const out = resolve(args.out!);
const t0 = performance.now();
const log = (line: string) =>
  console.log(`[two-role] ${line} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
const arms = args.arms!.split(",") as Arm[];
for (const arm of arms)
  if (arm !== "per-role" && arm !== "shared") throw new Error(`--arms: unknown arm "${arm}"`);

rmSync(out, { recursive: true, force: true });
await selectBackend();
const result = await runJob({ seed: Number(args.seed), out, arms, log });
const perRole = result.arms["per-role"];
if (perRole) {
  const rank = SETTINGS.grpo.rank;
  console.log(
    `[two-role] PEFT adapters on ${result.base}: writer ${perRole.peft.writer}, checker ${perRole.peft.checker}`,
  );
  console.log(
    `[two-role] serve both roles over one base: vllm serve ${result.base} --served-model-name two-role-base --enable-lora --max-lora-rank ${rank} --lora-modules writer=${perRole.peft.writer} checker=${perRole.peft.checker}`,
  );
}
const shared = result.arms.shared;
if (shared)
  console.log(
    `[two-role] the shared adapter: vllm serve ${result.base} --enable-lora --max-lora-rank ${2 * SETTINGS.grpo.rank} --lora-modules shared=${shared.peft.shared}`,
  );
log("done");
