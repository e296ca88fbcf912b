import type { ResourcesUpdate } from "@agl/core";
import { useState } from "preact/hooks";
import { formatTime } from "../../view/format.js";
import { diffResources, resourceEntries } from "../../view/resources.js";
import { EmptyState, ErrorState, Pager } from "../components.js";
import { api } from "../session.js";
import { useQuery } from "../use-query.js";

const PAGE = 20;

/** Resource versions, newest first, with what each one changed (API keys hidden). */
export function ResourcesPage() {
  const [offset, setOffset] = useState(0);
  // Insertion order is the only order every store supports; the newest page is read from the end.
  const count = useQuery(() => api.queryResources(1, 0), []);
  const total = count.data?.total ?? 0;
  const start = Math.max(0, total - offset - PAGE);
  const size = Math.min(PAGE + 1, total - start);
  const page = useQuery(
    async () => (total > 0 ? api.queryResources(size, start) : null),
    [total, start, size],
    10_000,
  );
  if (count.error) return <ErrorState error={count.error} onRetry={count.reload} />;
  if (page.error) return <ErrorState error={page.error} onRetry={page.reload} />;
  if (count.data && total === 0) {
    return (
      <EmptyState testId="state-no-resources" title="No resources in this store">
        An algorithm publishes its LLM endpoints and prompt templates here with updateResources().
      </EmptyState>
    );
  }
  if (!page.data) return <p class="loading">Loading resources…</p>;
  // One extra older version on the page, so the oldest shown version still has a diff.
  const items = page.data.items;
  const shown: Array<{ update: ResourcesUpdate; previous: ResourcesUpdate | null }> = [];
  for (let i = items.length - 1; i >= 0; i--) {
    if (start > 0 && i === 0) break;
    shown.push({ update: items[i]!, previous: i > 0 ? items[i - 1]! : null });
  }
  return (
    <section data-testid="page-resources">
      <h1>Resources</h1>
      {shown.map(({ update, previous }) => (
        <Version key={update.resources_id} update={update} previous={previous} />
      ))}
      <Pager offset={offset} limit={PAGE} total={total} onOffset={setOffset} />
    </section>
  );
}

function Version({ update, previous }: { update: ResourcesUpdate; previous: ResourcesUpdate | null }) {
  const entries = resourceEntries(update.resources);
  const diffs = diffResources(previous, update).filter((d) => d.change !== "unchanged");
  return (
    <article class="version" data-testid="resource-version" data-resources-id={update.resources_id}>
      <header>
        <strong class="mono">{update.resources_id}</strong> · version {update.version} · updated{" "}
        {formatTime(update.update_time)}
      </header>
      <table class="grid">
        <tbody>
          {entries.map((e) => (
            <tr key={e.name}>
              <td class="mono">{e.name}</td>
              <td>{e.type}</td>
              <td class="mono" data-testid="resource-summary">
                {e.summary}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <details open={previous !== null && diffs.length > 0}>
        <summary>
          {previous ? `changes since ${previous.resources_id} (${diffs.length})` : "full content"}
        </summary>
        {(previous ? diffs : diffResources(null, update)).map((d) => (
          <div key={d.name} class="diff" data-testid="resource-diff" data-change={d.change}>
            <div class="mono diff-name">
              {d.name} ({d.change})
            </div>
            <pre>
              {d.lines.map((l, i) => (
                <div key={i} class={`diff-${l.kind}`}>
                  {l.kind === "added" ? "+ " : l.kind === "removed" ? "- " : "  "}
                  {l.text}
                </div>
              ))}
            </pre>
          </div>
        ))}
      </details>
    </article>
  );
}
