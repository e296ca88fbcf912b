import type { RolloutMode, RolloutStatus } from "@agl/core";
import { useEffect, useMemo, useState } from "preact/hooks";
import { formatDuration, formatReward, formatTime } from "../../view/format.js";
import {
  filterRows,
  ROLLOUT_STATUSES,
  type RolloutRow,
  rewardFromSpans,
  toRolloutRow,
} from "../../view/rollout-rows.js";
import { EmptyState, ErrorState, Pager, StatusBadge } from "../components.js";
import { href, navigate, type Route } from "../router.js";
import { api } from "../session.js";
import { reportError, useQuery } from "../use-query.js";

export const PAGE_SIZE = 50;
const REFRESH_MS = 5000;
const MODES: readonly RolloutMode[] = ["train", "val", "test"];
const SORTABLE = ["rollout_id", "status", "mode", "start_time", "end_time", "resources_id"] as const;

/** Rewards of the visible rows: one small span query per rollout (reward spans of the latest attempt). */
function useRewards(rows: RolloutRow[] | undefined): Map<string, number | null> {
  const [rewards, setRewards] = useState(new Map<string, number | null>());
  const key = rows?.map((r) => `${r.rolloutId}:${r.status}`).join(",") ?? "";
  useEffect(() => {
    if (!rows?.length) return;
    let cancelled = false;
    const queue = rows.slice();
    const worker = async () => {
      for (let row = queue.shift(); row && !cancelled; row = queue.shift()) {
        try {
          const page = await api.querySpanPage(row.rolloutId, {
            attemptId: "latest",
            name: "agentlightning.annotation",
            limit: 100,
            offset: 0,
          });
          const reward = rewardFromSpans(page.items);
          const id = row.rolloutId;
          if (!cancelled) setRewards((m) => new Map(m).set(id, reward));
        } catch (error) {
          reportError(error);
        }
      }
    };
    void Promise.all(Array.from({ length: 6 }, worker));
    return () => {
      cancelled = true;
    };
  }, [key]);
  return rewards;
}

export function RolloutsPage({ route }: { route: Route }) {
  const p = route.params;
  const status = (p.get("status") ?? "").split(",").filter(Boolean) as RolloutStatus[];
  const search = p.get("q") ?? "";
  const mode = p.get("mode") ?? "";
  const dataId = p.get("data") ?? "";
  const sortBy = p.get("sort") ?? "start_time";
  const sortOrder = (p.get("order") ?? "desc") as "asc" | "desc";
  const offset = Number(p.get("offset") ?? 0) || 0;
  const [auto, setAuto] = useState(true);
  const [searchText, setSearchText] = useState(search);
  // What is typed into the data-id box lives here until it is committed (change/Enter): background
  // refreshes re-render the page every few seconds and must not wipe half-typed text.
  const [dataText, setDataText] = useState(dataId);
  useEffect(() => setDataText(dataId), [dataId]);

  const params = { status: status.join(","), q: search, mode, data: dataId, sort: sortBy, order: sortOrder };
  const go = (changes: Record<string, string | number>) =>
    navigate(["rollouts"], { ...params, offset, ...changes });

  // An agl-ts store filters mode and data id itself (paging and counts over the whole store); a
  // Python Agent Lightning server has no such filters, so they narrow the page it returned.
  const query = useQuery(
    async () => {
      const serverSide = (await api.storeKind()) === "agl-ts";
      const modeIn = MODES.filter((m) => m === mode);
      const page = await api.queryRollouts({
        statusIn: status,
        rolloutIdContains: search || undefined,
        ...(serverSide ? { modeIn, dataIdContains: dataId || undefined } : {}),
        sortBy,
        sortOrder,
        limit: PAGE_SIZE,
        offset,
      });
      return { page, serverSide, offset };
    },
    [status.join(","), search, mode, dataId, sortBy, sortOrder, offset],
    auto ? REFRESH_MS : undefined,
  );
  const serverSide = query.data?.serverSide ?? false;
  const total = query.data?.page.total;
  const now = Date.now() / 1000;
  const allRows = useMemo(() => query.data?.page.items.map((r) => toRolloutRow(r, now)), [query.data]);
  const rewards = useRewards(allRows);
  const rows = allRows && !serverSide ? filterRows(allRows, { mode, dataId }) : allRows;
  const filtered = status.length > 0 || !!search || (serverSide && (!!mode || !!dataId));
  const pageOnly = serverSide ? "" : " (this page)";

  const header = (field: (typeof SORTABLE)[number], label: string) => (
    <th>
      <a
        href={href(["rollouts"], {
          ...params,
          sort: field,
          order: sortBy === field && sortOrder === "asc" ? "desc" : "asc",
        })}
        data-testid={`sort-${field}`}
      >
        {label}
        {sortBy === field ? (sortOrder === "asc" ? " ▲" : " ▼") : ""}
      </a>
    </th>
  );

  return (
    <section data-testid="page-rollouts">
      <div class="toolbar">
        <div class="chips" data-testid="status-filter">
          {ROLLOUT_STATUSES.map((s) => {
            const on = status.includes(s);
            return (
              <button
                type="button"
                key={s}
                class={`chip ${on ? "on" : ""}`}
                data-testid={`status-${s}`}
                onClick={() =>
                  go({ status: (on ? status.filter((x) => x !== s) : [...status, s]).join(","), offset: 0 })
                }
              >
                {s}
              </button>
            );
          })}
        </div>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            go({ q: searchText.trim(), offset: 0 });
          }}
        >
          <input
            placeholder="search rollout id"
            value={searchText}
            data-testid="search"
            onInput={(e) => setSearchText((e.target as HTMLInputElement).value)}
          />
        </form>
        <select
          value={mode}
          data-testid="mode-filter"
          onChange={(e) => go({ mode: (e.target as HTMLSelectElement).value, offset: 0 })}
        >
          <option value="">any mode{pageOnly}</option>
          <option value="train">train</option>
          <option value="val">val</option>
          <option value="test">test</option>
        </select>
        <input
          placeholder={`data id${pageOnly}`}
          value={dataText}
          data-testid="data-filter"
          onInput={(e) => setDataText((e.target as HTMLInputElement).value)}
          onChange={(e) => go({ data: (e.target as HTMLInputElement).value.trim(), offset: 0 })}
        />
        <label class="auto">
          <input type="checkbox" checked={auto} onChange={() => setAuto(!auto)} /> auto-refresh
        </label>
      </div>
      {query.error && <ErrorState error={query.error} onRetry={query.reload} />}
      {!query.error && total === 0 && (
        <EmptyState
          testId={filtered ? "state-no-match" : "state-empty"}
          title={filtered ? "No rollout matches these filters" : "This store has no rollouts yet"}
        >
          {filtered
            ? "Clear the filters or the search to see more."
            : "Rollouts appear here as soon as an algorithm enqueues them or a runner starts one."}
        </EmptyState>
      )}
      {rows && allRows && total !== undefined && total > 0 && (
        <>
          <table class="grid" data-testid="rollouts-table">
            <thead>
              <tr>
                {header("rollout_id", "rollout")}
                {header("status", "status")}
                {header("mode", "mode")}
                <th>attempts</th>
                <th>reward</th>
                {header("start_time", "started")}
                <th>duration</th>
                {header("resources_id", "resources")}
                <th>data id</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => {
                const reward = rewards.get(r.rolloutId);
                return (
                  <tr key={r.rolloutId} data-testid="rollout-row" data-rollout-id={r.rolloutId}>
                    <td class="mono">
                      <a href={href(["rollouts", r.rolloutId])}>{r.rolloutId}</a>
                    </td>
                    <td>
                      <StatusBadge status={r.status} />
                    </td>
                    <td>{r.mode}</td>
                    <td title={r.latestAttemptStatus ?? ""}>{r.attempts}</td>
                    <td class="num" data-testid="reward">
                      {reward === undefined ? "…" : formatReward(reward)}
                    </td>
                    <td>{formatTime(r.startTime)}</td>
                    <td class="num">{formatDuration(r.durationSeconds)}</td>
                    <td class="mono">{r.resourcesId ?? "–"}</td>
                    <td class="mono">{r.dataId ?? "–"}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
          {rows.length < allRows.length && (
            <p class="note" data-testid="page-filter-note">
              {allRows.length - rows.length} of {allRows.length} rows on this page hidden by the mode / data
              id filter (this store filters only status and id itself)
            </p>
          )}
          {/* the page of the rows shown (a newer page may still be loading), so label and rows agree */}
          <Pager
            offset={query.data?.offset ?? offset}
            limit={PAGE_SIZE}
            total={total}
            onOffset={(o) => go({ offset: o })}
          />
        </>
      )}
      {!query.data && !query.error && <p class="loading">Loading rollouts…</p>}
    </section>
  );
}
