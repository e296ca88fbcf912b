import { useMemo } from "preact/hooks";
import { UnauthorizedError } from "../../view/api.js";
import { chartOrder, parseMetricsLog } from "../../view/metrics.js";
import { EmptyState, ErrorState, LineChart } from "../components.js";
import { fetchBeside } from "../session.js";
import { useQuery } from "../use-query.js";

/** null: the server has no metrics file configured. */
async function loadMetrics(): Promise<string | null> {
  const response = await fetchBeside("metrics.jsonl");
  if (response.status === 404) return null;
  if (response.status === 401 || response.status === 403)
    throw new UnauthorizedError("metrics need the token");
  if (!response.ok) throw new Error(`metrics file: HTTP ${response.status}`);
  return response.text();
}

/** The trainer's per-step metrics (reward, validation, losses, timings) as line charts. */
export function TrainingPage() {
  const metrics = useQuery(loadMetrics, [], 10_000);
  const log = useMemo(() => (metrics.data ? parseMetricsLog(metrics.data) : null), [metrics.data]);
  if (metrics.error) return <ErrorState error={metrics.error} onRetry={metrics.reload} />;
  if (metrics.data === undefined) return <p class="loading">Loading metrics…</p>;
  if (metrics.data === null || !log || log.series.size === 0) {
    return (
      <EmptyState testId="state-no-metrics" title="No training metrics">
        Start the server with --metrics &lt;file.jsonl&gt; pointing at the trainer's metrics log (one JSON
        object per step with a numeric "step").
      </EmptyState>
    );
  }
  const keys = chartOrder(log.series.keys());
  const main = keys.filter((k) => /reward|accuracy/.test(k));
  const rest = keys.filter((k) => !main.includes(k));
  return (
    <section data-testid="page-training">
      <h1>Training</h1>
      {log.badLines.length > 0 && (
        <p class="note">
          Skipped {log.badLines.length} unreadable line(s): {log.badLines.slice(0, 10).join(", ")}
        </p>
      )}
      <div class="charts">
        {main.length > 0 && (
          <LineChart
            title="reward and validation"
            testId="chart-main"
            series={main.map((k) => ({ label: k, ...log.series.get(k)! }))}
          />
        )}
        {rest.map((k) => (
          <LineChart key={k} title={k} testId={`chart-${k}`} series={[{ label: k, ...log.series.get(k)! }]} />
        ))}
      </div>
    </section>
  );
}
