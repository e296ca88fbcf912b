import type { Attempt, AttemptedRollout, Rollout, Span } from "@agl/core";
import { useMemo, useState } from "preact/hooks";
import { attemptError } from "../../view/attempt-error.js";
import { formatDuration, formatReward, formatTime, preview } from "../../view/format.js";
import { analyzeRollout } from "../../view/llm-calls.js";
import { dataIdOf } from "../../view/rollout-rows.js";
import { buildSpanTimeline } from "../../view/span-tree.js";
import { EmptyState, ErrorState, StatusBadge } from "../components.js";
import { href } from "../router.js";
import { api } from "../session.js";
import { useQuery } from "../use-query.js";
import { LlmCalls } from "./llm-calls.js";
import { SpanTree } from "./span-tree.js";
import { Triplets } from "./triplets.js";

interface Detail {
  rollout: Rollout | AttemptedRollout | null;
  attempts: Attempt[];
}

export function RolloutDetailPage({
  rolloutId,
  attemptParam,
}: {
  rolloutId: string;
  attemptParam: string | null;
}) {
  const detail = useQuery<Detail>(async () => {
    const [rollout, attempts] = await Promise.all([api.getRollout(rolloutId), api.queryAttempts(rolloutId)]);
    return { rollout, attempts };
  }, [rolloutId]);
  const attempts = detail.data?.attempts ?? [];
  const latest = attempts[attempts.length - 1];
  const attemptId = attemptParam ?? latest?.attempt_id;
  const spans = useQuery<{ spans: Span[]; total: number } | null>(
    async () => (attemptId ? api.querySpans(rolloutId, attemptId) : null),
    [rolloutId, attemptId],
  );

  if (detail.error) return <ErrorState error={detail.error} onRetry={detail.reload} />;
  if (!detail.data) return <p class="loading">Loading rollout…</p>;
  const rollout = detail.data.rollout;
  if (!rollout) {
    return (
      <EmptyState testId="state-not-found" title={`No rollout ${rolloutId} in this store`}>
        <a href={href(["rollouts"])}>Back to the rollouts</a>
      </EmptyState>
    );
  }
  return (
    <section data-testid="page-rollout">
      <p>
        <a href={href(["rollouts"])}>‹ rollouts</a>
      </p>
      <h1 class="mono" data-testid="rollout-id">
        {rollout.rollout_id} <StatusBadge status={rollout.status} />
      </h1>
      <dl class="facts">
        <dt>mode</dt>
        <dd>{rollout.mode ?? "–"}</dd>
        <dt>started</dt>
        <dd>{formatTime(rollout.start_time)}</dd>
        <dt>duration</dt>
        <dd>{formatDuration(rollout.end_time ? rollout.end_time - rollout.start_time : null)}</dd>
        <dt>resources</dt>
        <dd class="mono">{rollout.resources_id ?? "–"}</dd>
        <dt>data id</dt>
        <dd class="mono">{dataIdOf(rollout) ?? "–"}</dd>
        <dt>max attempts</dt>
        <dd>{rollout.config?.max_attempts ?? 1}</dd>
      </dl>
      <details open>
        <summary>input</summary>
        <pre class="json" data-testid="rollout-input">
          {JSON.stringify(rollout.input, null, 2)}
        </pre>
      </details>
      <AttemptsTable attempts={attempts} selected={attemptId} rolloutId={rolloutId} />
      <AttemptErrorBox attempt={attempts.find((a) => a.attempt_id === attemptId)} />
      {spans.error && <ErrorState error={spans.error} onRetry={spans.reload} />}
      {!spans.error && !spans.data && attemptId && <p class="loading">Loading spans…</p>}
      {!attemptId && (
        <EmptyState testId="state-no-attempts" title="No attempt yet">
          The rollout is waiting in the queue; spans appear once a runner picks it up.
        </EmptyState>
      )}
      {spans.data && <SpanSections spans={spans.data.spans} total={spans.data.total} />}
    </section>
  );
}

function AttemptsTable({
  attempts,
  selected,
  rolloutId,
}: {
  attempts: Attempt[];
  selected: string | undefined;
  rolloutId: string;
}) {
  if (attempts.length === 0) return null;
  return (
    <>
      <h2>Attempts</h2>
      <table class="grid" data-testid="attempts-table">
        <thead>
          <tr>
            <th>#</th>
            <th>attempt</th>
            <th>status</th>
            <th>worker</th>
            <th>started</th>
            <th>duration</th>
            <th>last heartbeat</th>
            <th>error</th>
          </tr>
        </thead>
        <tbody>
          {attempts.map((a) => (
            <tr
              key={a.attempt_id}
              class={a.attempt_id === selected ? "selected" : ""}
              data-testid="attempt-row"
            >
              <td>{a.sequence_id}</td>
              <td class="mono">
                <a href={href(["rollouts", rolloutId], { attempt: a.attempt_id })}>{a.attempt_id}</a>
              </td>
              <td>
                <StatusBadge status={a.status} />
              </td>
              <td class="mono">{a.worker_id ?? "–"}</td>
              <td>{formatTime(a.start_time)}</td>
              <td class="num">{formatDuration(a.end_time ? a.end_time - a.start_time : null)}</td>
              <td>{formatTime(a.last_heartbeat_time)}</td>
              <td class="mono" data-testid="attempt-error-cell">
                {attemptErrorLine(a)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function attemptErrorLine(attempt: Attempt): string {
  const error = attemptError(attempt);
  return error ? preview(`${error.type}: ${error.message}`, 80) : "";
}

/** Why the selected attempt failed (the runner's `metadata.error`), even when it left no spans. */
function AttemptErrorBox({ attempt }: { attempt: Attempt | undefined }) {
  const error = attempt ? attemptError(attempt) : null;
  if (!attempt || !error) return null;
  return (
    <div class="state state-bad attempt-error" data-testid="attempt-error">
      <h2>
        Attempt {attempt.sequence_id} {attempt.status ?? "ended"}:{" "}
        <span class="mono" data-testid="attempt-error-type">
          {error.type}
        </span>
      </h2>
      <p class="mono" data-testid="attempt-error-message">
        {error.message}
      </p>
      {error.field && (
        <p>
          field <span class="mono">{error.field}</span>
        </p>
      )}
      {error.stack && (
        <details>
          <summary>stack</summary>
          <pre class="json">{error.stack}</pre>
        </details>
      )}
    </div>
  );
}

function SpanSections({ spans, total }: { spans: Span[]; total: number }) {
  const [tab, setTab] = useState<"tree" | "calls" | "triplets">("tree");
  const timeline = useMemo(() => buildSpanTimeline(spans), [spans]);
  const analysis = useMemo(() => analyzeRollout(spans), [spans]);
  if (spans.length === 0) {
    return (
      <EmptyState testId="state-no-spans" title="This attempt has no spans">
        Nothing was traced: the agent made no instrumented call, or its spans did not reach the store (check
        the tracer / proxy configuration of the runner).
      </EmptyState>
    );
  }
  const rewards = timeline.rows.filter((r) => r.reward !== null);
  return (
    <>
      <h2>
        Rewards{" "}
        <span class="count" data-testid="reward-count">
          {rewards.length}
        </span>
      </h2>
      {rewards.length === 0 ? (
        <p class="note" data-testid="no-reward">
          No reward span in this attempt.
        </p>
      ) : (
        <ul class="rewards" data-testid="rewards">
          {rewards.map((r) => (
            <li key={r.spanId}>
              <strong data-testid="reward-value">{formatReward(r.reward)}</strong>{" "}
              <span class="mono">{r.name}</span> at {formatTime(r.endTime ?? r.startTime)}
            </li>
          ))}
        </ul>
      )}
      {spans.length < total && (
        <p class="note">
          Showing the first {spans.length.toLocaleString("en")} of {total.toLocaleString("en")} spans.
        </p>
      )}
      <div class="tabs">
        <button
          type="button"
          class={tab === "tree" ? "on" : ""}
          data-testid="tab-tree"
          onClick={() => setTab("tree")}
        >
          Spans ({spans.length})
        </button>
        <button
          type="button"
          class={tab === "calls" ? "on" : ""}
          data-testid="tab-calls"
          onClick={() => setTab("calls")}
        >
          LLM calls ({analysis.calls.length})
        </button>
        <button
          type="button"
          class={tab === "triplets" ? "on" : ""}
          data-testid="tab-triplets"
          onClick={() => setTab("triplets")}
        >
          Triplets ({analysis.triplets.length})
        </button>
      </div>
      {tab === "tree" && <SpanTree timeline={timeline} />}
      {tab === "calls" && <LlmCalls calls={analysis.calls} />}
      {tab === "triplets" && <Triplets analysis={analysis} />}
      <p class="note">
        {preview(`${spans.length} spans · ${formatDuration(timeline.durationSeconds)} traced`, 120)}
      </p>
    </>
  );
}
