import type { ComponentChildren } from "preact";
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import { StoreHttpError, StoreUnreachableError, UnauthorizedError } from "../view/api.js";
import { STEP_INCREMENTS, stepLabel, tickLabels, yRange } from "../view/chart-axes.js";
import { showPiece } from "../view/token-text.js";
import type { TokenCell } from "../view/tokens.js";

export function StatusBadge({ status }: { status: string | null }) {
  return <span class={`badge status-${status ?? "none"}`}>{status ?? "–"}</span>;
}

/** The page's answer to a failed request: unreachable, 401 or the store's own error. */
export function ErrorState({ error, onRetry }: { error: Error; onRetry?: () => void }) {
  let title = "The store returned an error";
  let testId = "state-error";
  if (error instanceof StoreUnreachableError) {
    title = "The store is unreachable";
    testId = "state-unreachable";
  } else if (error instanceof UnauthorizedError) {
    title = "Sign in to see this store";
    testId = "state-unauthorized";
  } else if (error instanceof StoreHttpError) {
    title = `The store answered ${error.status}`;
  }
  return (
    <div class="state state-bad" data-testid={testId}>
      <h2>{title}</h2>
      <p class="mono">{error.message}</p>
      {onRetry && (
        <button type="button" onClick={onRetry}>
          Retry
        </button>
      )}
    </div>
  );
}

export function EmptyState({
  title,
  children,
  testId,
}: {
  title: string;
  children?: ComponentChildren;
  testId: string;
}) {
  return (
    <div class="state" data-testid={testId}>
      <h2>{title}</h2>
      {children && <p>{children}</p>}
    </div>
  );
}

export function Pager({
  offset,
  limit,
  total,
  onOffset,
}: {
  offset: number;
  limit: number;
  total: number;
  onOffset: (offset: number) => void;
}) {
  const page = Math.floor(offset / limit) + 1;
  const pages = Math.max(1, Math.ceil(total / limit));
  return (
    <div class="pager" data-testid="pager">
      <button type="button" disabled={offset === 0} onClick={() => onOffset(0)}>
        «
      </button>
      <button type="button" disabled={offset === 0} onClick={() => onOffset(Math.max(0, offset - limit))}>
        ‹ Prev
      </button>
      <span data-testid="page-info">
        page {page} of {pages} · {total.toLocaleString("en")} total
      </span>
      <button type="button" disabled={page >= pages} onClick={() => onOffset(offset + limit)}>
        Next ›
      </button>
      <button type="button" disabled={page >= pages} onClick={() => onOffset((pages - 1) * limit)}>
        »
      </button>
    </div>
  );
}

/**
 * Tokens as cells, coloured by role (prompt / generated / observation): the decoded piece where the
 * spans give one (whitespace shown), else the id; the id, mask and logprob on hover.
 */
export function TokenStrip({
  cells,
  testId,
  text,
}: {
  cells: TokenCell[];
  testId?: string;
  text?: ReadonlyMap<number, string>;
}) {
  return (
    <div class="tokens" data-testid={testId}>
      {cells.map((c) => {
        const piece = text?.get(c.id);
        return (
          <span
            key={c.index}
            class={`tok tok-${c.role}${piece === undefined ? " tok-id" : ""}`}
            data-mask={c.mask ?? ""}
            data-id={c.id}
            title={`#${c.index} id ${c.id}${piece !== undefined ? ` ${JSON.stringify(piece)}` : ""} · ${c.role}${c.mask !== null ? ` · mask ${c.mask}` : ""}${c.logprob !== null ? ` · logprob ${c.logprob.toFixed(3)}` : ""}`}
          >
            {piece === undefined ? c.id : showPiece(piece)}
          </span>
        );
      })}
    </div>
  );
}

export interface ChartSeries {
  label: string;
  steps: number[];
  values: number[];
}

const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c"];

/** A uPlot line chart of one or more metrics over the training step. */
export function LineChart({
  title,
  series,
  testId,
}: {
  title: string;
  series: ChartSeries[];
  testId?: string;
}) {
  const host = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!host.current) return;
    const steps = [...new Set(series.flatMap((s) => s.steps))].sort((a, b) => a - b);
    const columns = series.map((s) => {
      const byStep = new Map(s.steps.map((step, i) => [step, s.values[i]!]));
      return steps.map((step) => byStep.get(step) ?? null);
    });
    const plot = new uPlot(
      {
        width: Math.max(280, host.current.clientWidth || 420),
        height: 220,
        title,
        scales: { x: { time: false }, y: { range: (_u, min, max) => yRange(min, max) } },
        axes: [
          {
            label: "step",
            incrs: STEP_INCREMENTS,
            values: (_u, splits) => {
              const labels = splits.map(stepLabel);
              if (host.current) host.current.dataset.xTicks = labels.filter((l) => l !== "").join("|");
              return labels;
            },
          },
          {
            values: (_u, splits) => {
              const labels = tickLabels(splits);
              // The drawn labels, for people reading the DOM (and the browser tests): the canvas has no text.
              if (host.current) host.current.dataset.yTicks = labels.join("|");
              return labels;
            },
            // Room for the longest label: more decimals need a wider axis.
            size: (_u, values) => 16 + 7 * Math.max(3, ...(values ?? []).map((v) => String(v).length)),
          },
        ],
        series: [
          { label: "step" },
          ...series.map((s, i) => ({
            label: s.label,
            stroke: COLORS[i % COLORS.length],
            width: 2,
            spanGaps: true,
          })),
        ],
      },
      [steps, ...columns] as uPlot.AlignedData,
      host.current,
    );
    return () => plot.destroy();
  }, [title, series]);
  return (
    <div
      class="chart"
      ref={host}
      data-testid={testId}
      data-points={series.map((s) => s.values.length).join(",")}
    />
  );
}
