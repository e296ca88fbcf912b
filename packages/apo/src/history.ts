import type { LightningStore } from "@agl/core";
import { createTwoFilesPatch } from "diff";
import { Journal, type PromptHistory, type PromptVersion } from "./journal.js";

/** Every version of an APO run, with parents and scores, read from the store (null: no such run). */
export function loadPromptHistory(
  store: LightningStore,
  options: { runId?: string } = {},
): Promise<PromptHistory | null> {
  return new Journal(store, options.runId ?? "apo").load();
}

/**
 * The best prompt of an APO run: the version with the best full-validation score the run tracked (its
 * beam leader check), else the best score any version has. Null when the store has no such run.
 */
export async function bestPrompt(
  store: LightningStore,
  options: { runId?: string } = {},
): Promise<PromptVersion | null> {
  const history = await loadPromptHistory(store, options);
  if (!history) return null;
  return bestOf(history);
}

export function bestOf(history: PromptHistory): PromptVersion | null {
  if (history.best) {
    const tracked = history.versions.find((v) => v.version === history.best!.version);
    if (tracked) return tracked;
  }
  let best: PromptVersion | null = null;
  for (const v of history.versions) {
    if (v.score !== null && (best === null || best.score === null || v.score > best.score)) best = v;
  }
  return best ?? history.versions[0] ?? null;
}

export interface FormatHistoryOptions {
  /** Show each version's change against its parent as a unified diff (default true). */
  diff?: boolean;
  /** Show the critique that led to each version (default false). */
  critique?: boolean;
}

/** A readable account of a run: one block per version with its parent, scores and diff. */
export function formatPromptHistory(history: PromptHistory, options: FormatHistoryOptions = {}): string {
  const showDiff = options.diff ?? true;
  const byVersion = new Map(history.versions.map((v) => [v.version, v]));
  const best = bestOf(history);
  const lines: string[] = [
    `APO run "${history.runId}" (prompt resource "${history.resourceName}"): ${history.completedRounds} rounds done, ` +
      `${history.versions.length} versions, ${history.rejected.length} rejected edits`,
    `beam: ${history.beam.join(", ") || "-"}; best: ${best ? `${best.version} (${fmt(history.best?.score ?? best.score)})` : "-"}`,
  ];
  const problems = Object.entries(history.problems);
  if (problems.length > 0) lines.push(`problems: ${problems.map(([k, v]) => `${k}=${v}`).join(" ")}`);
  lines.push("", "version  parent  round  score   scores (round:split=score)");
  for (const v of history.versions) {
    const scores = v.scores.map((s) => `${s.round}:${s.split}=${s.score.toFixed(3)}`).join(" ");
    lines.push(
      `${v.version.padEnd(8)} ${(v.parent ?? "-").padEnd(7)} ${String(v.round).padEnd(6)} ${fmt(v.score).padEnd(7)} ${scores}`,
    );
  }
  for (const v of history.versions) {
    lines.push("", `=== ${v.version}${v.parent ? ` (from ${v.parent})` : " (seed)"}  score ${fmt(v.score)}`);
    if (options.critique && v.critique) lines.push("critique:", indent(v.critique));
    const parent = v.parent ? byVersion.get(v.parent) : undefined;
    if (showDiff && parent) lines.push(promptDiff(parent, v));
    else lines.push(indent(v.template.template));
  }
  if (history.rejected.length > 0) {
    lines.push("", "rejected edits:");
    for (const r of history.rejected) {
      lines.push(`  round ${r.round} ${r.parent} branch ${r.branch}: ${r.reason} (${r.detail})`);
    }
  }
  return lines.join("\n");
}

/** Unified diff of a version's template against its parent's. */
export function promptDiff(parent: PromptVersion, child: PromptVersion): string {
  const patch = createTwoFilesPatch(
    parent.version,
    child.version,
    withNewline(parent.template.template),
    withNewline(child.template.template),
    undefined,
    undefined,
    { context: 2 },
  );
  // Drop the "====" banner createTwoFilesPatch starts with; keep ---/+++ and the hunks.
  return patch
    .split("\n")
    .filter((l) => !/^={3,}$/.test(l))
    .join("\n")
    .trimEnd();
}

const withNewline = (s: string) => (s.endsWith("\n") ? s : `${s}\n`);
const indent = (s: string) =>
  s
    .split("\n")
    .map((l) => `  ${l}`)
    .join("\n");
const fmt = (n: number | null | undefined) =>
  n === null || n === undefined || Number.isNaN(n) ? "-" : n.toFixed(3);
