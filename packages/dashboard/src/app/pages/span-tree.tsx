import { useState } from "preact/hooks";
import { formatDuration, formatReward } from "../../view/format.js";
import type { SpanRow, SpanTimeline } from "../../view/span-tree.js";

/** The span tree with a timeline bar per span; click a row for its attributes. */
export function SpanTree({ timeline }: { timeline: SpanTimeline }) {
  const [open, setOpen] = useState<string | null>(null);
  return (
    <div class="span-tree" data-testid="span-tree">
      <div class="span-head">
        <span>span</span>
        <span>duration</span>
        <span>timeline ({formatDuration(timeline.durationSeconds)})</span>
      </div>
      {timeline.rows.map((row) => (
        <SpanLine
          key={`${row.spanId}-${row.depth}`}
          row={row}
          open={open === row.spanId}
          onToggle={setOpen}
        />
      ))}
    </div>
  );
}

function SpanLine({
  row,
  open,
  onToggle,
}: {
  row: SpanRow;
  open: boolean;
  onToggle: (id: string | null) => void;
}) {
  return (
    <>
      <button
        type="button"
        class={`span-row ${row.virtual ? "virtual" : ""} ${row.statusCode === "ERROR" ? "error" : ""}`}
        data-testid="span-row"
        data-span-name={row.name}
        onClick={() => onToggle(open ? null : row.spanId)}
      >
        <span class="span-name" style={{ paddingLeft: `${row.depth * 16}px` }} title={row.spanId}>
          {row.childCount > 0 ? "▾ " : "· "}
          {row.name}
          {row.reward !== null && <span class="badge reward"> reward {formatReward(row.reward)}</span>}
        </span>
        <span class="num">{formatDuration(row.durationSeconds)}</span>
        <span class="bar-track">
          <span
            class="bar"
            style={{ left: `${row.offset * 100}%`, width: `max(2px, ${row.width * 100}%)` }}
            data-testid="span-bar"
          />
        </span>
      </button>
      {open && (
        <pre class="json span-attrs" data-testid="span-attributes">
          {JSON.stringify(
            {
              span_id: row.span.span_id,
              parent_id: row.span.parent_id,
              attempt_id: row.attemptId,
              sequence_id: row.sequenceId,
              status: row.span.status,
              attributes: row.span.attributes,
              events: row.span.events,
            },
            null,
            2,
          )}
        </pre>
      )}
    </>
  );
}
