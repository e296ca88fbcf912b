/** A trainer's metrics log (JSON lines, one object per step with a numeric `step`) as chart series. */
export interface MetricSeries {
  key: string;
  /** Steps and values, in step order; steps where the key is absent are left out. */
  steps: number[];
  values: number[];
}

export interface MetricsLog {
  series: Map<string, MetricSeries>;
  /** Lines that were not a JSON object with a numeric step (reported, not fatal). */
  badLines: number[];
}

export function parseMetricsLog(text: string): MetricsLog {
  const series = new Map<string, MetricSeries>();
  const badLines: number[] = [];
  const rows: Array<{ step: number; record: Record<string, unknown> }> = [];
  text.split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch {
      badLines.push(i + 1);
      return;
    }
    const step = (record as { step?: unknown } | null)?.step;
    if (typeof record !== "object" || record === null || typeof step !== "number" || !Number.isFinite(step)) {
      badLines.push(i + 1);
      return;
    }
    rows.push({ step, record: record as Record<string, unknown> });
  });
  rows.sort((a, b) => a.step - b.step);
  for (const { step, record } of rows) {
    for (const [key, value] of Object.entries(record)) {
      if (key === "step" || typeof value !== "number" || !Number.isFinite(value)) continue;
      let s = series.get(key);
      if (!s) series.set(key, (s = { key, steps: [], values: [] }));
      s.steps.push(step);
      s.values.push(value);
    }
  }
  return { series, badLines };
}

/** Reward and validation curves first, then the other metrics grouped by prefix ("actor/", "timing_s/"). */
export function chartOrder(keys: Iterable<string>): string[] {
  const rank = (k: string) =>
    /reward/.test(k) ? 0 : /^val\//.test(k) || /accuracy/.test(k) ? 1 : /loss|kl|entropy/.test(k) ? 2 : 3;
  return [...keys].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}
