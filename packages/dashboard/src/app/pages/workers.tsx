import { useState } from "preact/hooks";
import { formatDuration, formatTime } from "../../view/format.js";
import { EmptyState, ErrorState, Pager, StatusBadge } from "../components.js";
import { href } from "../router.js";
import { api } from "../session.js";
import { useQuery } from "../use-query.js";

const PAGE = 50;

export function WorkersPage() {
  const [offset, setOffset] = useState(0);
  const workers = useQuery(() => api.queryWorkers(PAGE, offset), [offset], 5000);
  if (workers.error) return <ErrorState error={workers.error} onRetry={workers.reload} />;
  if (!workers.data) return <p class="loading">Loading workers…</p>;
  if (workers.data.total === 0) {
    return (
      <EmptyState testId="state-no-workers" title="No worker has reported to this store">
        Runners register when they first dequeue a rollout or send a heartbeat.
      </EmptyState>
    );
  }
  const now = Date.now() / 1000;
  return (
    <section data-testid="page-workers">
      <h1>Workers</h1>
      <table class="grid" data-testid="workers-table">
        <thead>
          <tr>
            <th>worker</th>
            <th>status</th>
            <th>heartbeat age</th>
            <th>current rollout</th>
            <th>last dequeue</th>
            <th>stats</th>
          </tr>
        </thead>
        <tbody>
          {workers.data.items.map((w) => (
            <tr key={w.worker_id} data-testid="worker-row">
              <td class="mono">{w.worker_id}</td>
              <td>
                <StatusBadge status={w.status} />
              </td>
              <td class="num" data-testid="heartbeat-age">
                {w.last_heartbeat_time ? formatDuration(Math.max(0, now - w.last_heartbeat_time)) : "never"}
              </td>
              <td class="mono">
                {w.current_rollout_id ? (
                  <a href={href(["rollouts", w.current_rollout_id])}>{w.current_rollout_id}</a>
                ) : (
                  "–"
                )}
              </td>
              <td>{formatTime(w.last_dequeue_time)}</td>
              <td class="mono small">
                {w.heartbeat_stats ? JSON.stringify(w.heartbeat_stats).slice(0, 80) : "–"}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager offset={offset} limit={PAGE} total={workers.data.total} onOffset={setOffset} />
    </section>
  );
}
