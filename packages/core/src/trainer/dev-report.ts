import type { RunnerSummary } from "../runner/runner-options.js";
import type { BaselineSummary } from "./baseline.js";

const MAX_ROWS = 20;
const INPUT_WIDTH = 48;

/**
 * The compact table `trainer.dev()` prints: one header line with the totals, then one row per rollout
 * (at most 20) when the algorithm reports rollouts the way Baseline does, else the runners' counts.
 */
export function formatDevReport(result: unknown, runners: readonly RunnerSummary[], seconds: number): string {
  const lines: string[] = [];
  if (isBaselineSummary(result)) {
    const reward = result.meanReward === null ? "none" : result.meanReward.toFixed(3);
    lines.push(
      `agl dev: ${result.rollouts.length} rollouts, ${result.succeeded} succeeded, ${result.failed} failed` +
        `${result.unfinished ? `, ${result.unfinished} unfinished` : ""}, mean reward ${reward}, ${seconds.toFixed(1)} s`,
    );
    const rows = result.rollouts
      .slice(0, MAX_ROWS)
      .map((r, i) => [
        String(i + 1),
        r.status,
        r.reward === null ? "-" : String(Number(r.reward.toFixed(4))),
        String(r.attempts),
        String(r.spanCount),
        clip(r.error ? `${preview(r.input)}  error: ${r.error}` : preview(r.input)),
      ]);
    lines.push(...table(["#", "status", "reward", "attempts", "spans", "input"], rows));
    if (result.rollouts.length > MAX_ROWS) lines.push(`  ... ${result.rollouts.length - MAX_ROWS} more`);
  } else {
    const sum = (k: "claimed" | "succeeded" | "failed" | "stale") => runners.reduce((n, r) => n + r[k], 0);
    lines.push(
      `agl dev: ${sum("claimed")} rollouts, ${sum("succeeded")} succeeded, ${sum("failed")} failed, ` +
        `${sum("stale")} ended by the store, ${seconds.toFixed(1)} s`,
    );
  }
  return `${lines.join("\n")}\n`;
}

function isBaselineSummary(value: unknown): value is BaselineSummary {
  return (
    typeof value === "object" &&
    value !== null &&
    Array.isArray((value as BaselineSummary).rollouts) &&
    typeof (value as BaselineSummary).succeeded === "number"
  );
}

function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c]!.length)));
  const line = (cells: string[]) =>
    `  ${cells.map((cell, c) => (c === cells.length - 1 ? cell : cell.padEnd(widths[c]!))).join("  ")}`;
  return [line(header), ...rows.map(line)];
}

function preview(input: unknown): string {
  try {
    return typeof input === "string" ? input : (JSON.stringify(input) ?? String(input));
  } catch {
    return String(input);
  }
}

function clip(text: string): string {
  const flat = text.replace(/[\r\n\t]+/g, " ");
  return flat.length > INPUT_WIDTH * 2 ? `${flat.slice(0, INPUT_WIDTH * 2 - 1)}…` : flat;
}
