/**
 * Run the agent on a checkpoint (a Hugging Face folder, e.g. `<out>/sft-best` or an `sft-probe.ts --save`
 * folder) on the first N validation problems, greedy once and sampled `--samples` times, and print where
 * the episodes go wrong (src/episode-failures.ts) with a few transcripts:
 *
 *   pnpm exec tsx examples/calc-agent-qwen3/src/inspect-episodes.ts --dir /tmp/probe --problems 50 [--samples 4] [--seed 1]
 */
import { parseArgs } from "node:util";
import { loadPretrainedPolicy, selectBackend } from "@agl/trainer-gpu";
import { makeSplits } from "./dataset.js";
import { classifyEpisode, tallyEpisodes } from "./episode-failures.js";
import { runEpisodes } from "./evaluate.js";
import { MAIN_JOB } from "./settings.js";

const { values: a } = parseArgs({
  options: {
    dir: { type: "string" },
    problems: { type: "string", default: "50" },
    samples: { type: "string", default: "4" },
    seed: { type: "string", default: "1" },
    show: { type: "string", default: "4" },
  },
});
if (!a.dir) throw new Error("--dir is required");
await selectBackend({ log: () => {} });
const policy = await loadPretrainedPolicy(a.dir);
const problems = makeSplits(MAIN_JOB.splits, Number(a.seed)).val.slice(0, Number(a.problems));
try {
  for (const [label, temperature, reps] of [
    ["greedy", 0, 1],
    ["sampled (T=1)", 1, Number(a.samples)],
  ] as const) {
    const rep = Array.from({ length: reps }, () => problems).flat();
    const { attempts, summary } = await runEpisodes(policy, rep, {
      temperature,
      seed: Number(a.seed) * 7 + 3,
    });
    const reports = attempts.map((at, i) => classifyEpisode(rep[i]!, at));
    attempts.slice(0, Number(a.show)).forEach((at, i) => {
      const turns = at.messages.slice(1).map((m) => {
        if ("tool_calls" in m && m.tool_calls?.length) {
          const c = m.tool_calls[0]!;
          return `call ${c.type === "function" ? c.function.arguments : "?"}`;
        }
        return `${m.role} ${JSON.stringify(m.content)}`;
      });
      console.log(`${label} ${rep[i]!.question} (${rep[i]!.answer}): ${turns.join(" | ")}`);
    });
    console.log(
      `${label}: ${(100 * summary.accuracy).toFixed(1)}% of ${summary.n} episodes; ${JSON.stringify(tallyEpisodes(reports))}`,
    );
  }
} finally {
  policy.model.dispose();
}
