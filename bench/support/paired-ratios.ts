/**
 * After/before ratios of a bench/store-rollout.ts result with a baseline, from its repeats taken as
 * pairs (each repeat runs both builds back to back): per backend, the mean of the per-pair ratios of
 * server CPU per rollout and rollouts/s, with a 95% confidence interval (Student's t), so a change
 * smaller than the run-to-run spread is told apart from noise only when the interval excludes 1.
 *
 *   pnpm exec tsx bench/support/paired-ratios.ts bench/results/store-rollout-regression.json
 */
import { readFileSync } from "node:fs";

interface Row {
  build: string;
  backend: string;
  repeat: number;
  rollouts_per_s: number;
  server_cpu_ms_per_rollout: number;
  total_cpu_ms_per_rollout: number;
}

/** Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom (then the normal's 1.96). */
const T975 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131,
  2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

export function meanWithInterval(xs: number[]): { mean: number; low: number; high: number; n: number } {
  const n = xs.length;
  const mean = xs.reduce((a, b) => a + b, 0) / n;
  if (n < 2) return { mean, low: Number.NaN, high: Number.NaN, n };
  const sd = Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (n - 1));
  const half = (T975[n - 2] ?? 1.96) * (sd / Math.sqrt(n));
  return { mean, low: mean - half, high: mean + half, n };
}

export function pairedRatios(rows: Row[]): string[] {
  const lines = [
    "| backend | pairs | server CPU after/before (95% CI) | server+database CPU after/before (95% CI) | rollouts/s after/before (95% CI) |",
    "|---|---:|---:|---:|---:|",
  ];
  const f = (x: { mean: number; low: number; high: number }) =>
    `${x.mean.toFixed(3)} (${x.low.toFixed(3)}-${x.high.toFixed(3)})`;
  for (const backend of [...new Set(rows.map((r) => r.backend))]) {
    const cpu: number[] = [];
    const total: number[] = [];
    const rate: number[] = [];
    for (const repeat of [...new Set(rows.map((r) => r.repeat))]) {
      const b = rows.find((r) => r.backend === backend && r.repeat === repeat && r.build === "before");
      const a = rows.find((r) => r.backend === backend && r.repeat === repeat && r.build === "after");
      if (!a || !b) continue;
      cpu.push(a.server_cpu_ms_per_rollout / b.server_cpu_ms_per_rollout);
      total.push(a.total_cpu_ms_per_rollout / b.total_cpu_ms_per_rollout);
      rate.push(a.rollouts_per_s / b.rollouts_per_s);
    }
    if (cpu.length === 0) continue;
    lines.push(
      `| ${backend} | ${cpu.length} | ${f(meanWithInterval(cpu))} | ${f(meanWithInterval(total))} | ${f(meanWithInterval(rate))} |`,
    );
  }
  return lines;
}

if (process.argv[1]?.endsWith("paired-ratios.ts")) {
  const file = process.argv[2];
  if (!file) {
    console.error("usage: paired-ratios.ts <store-rollout result .json>");
    process.exit(2);
  }
  const result = JSON.parse(readFileSync(file, "utf8")) as { rollout: Row[] };
  console.log(pairedRatios(result.rollout).join("\n"));
}
