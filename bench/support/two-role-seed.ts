/**
 * One seed of bench/two-role.ts, in its own process: the example's job (examples/two-role-agent/src/job.ts)
 * with both arms, (a) one shared adapter first, then (b) an adapter per role, from the same warm-up.
 * Writes `<out>/result.json`.
 *
 *   pnpm exec tsx bench/support/two-role-seed.ts --seed 1 --out /tmp/two-role/seed-1
 */
import { parseArgs } from "node:util";
import { selectBackend } from "@agl/trainer-gpu";
import type { Arm } from "../../examples/two-role-agent/src/experiment.js";
import { runJob } from "../../examples/two-role-agent/src/job.js";

const { values } = parseArgs({
  options: {
    seed: { type: "string", default: "1" },
    out: { type: "string" },
    arms: { type: "string", default: "shared,per-role" },
    /** Reuse the warm-up a previous run left in --out. */
    resume: { type: "boolean", default: false },
  },
});
const seed = Number(values.seed);
const t0 = performance.now();
await selectBackend({ log: () => {} });
await runJob({
  seed,
  out: values.out!,
  arms: values.arms!.split(",") as Arm[],
  saveResult: true,
  resume: values.resume,
  log: (line) => console.log(`[seed ${seed}] ${line} (${((performance.now() - t0) / 1000).toFixed(1)} s)`),
});
