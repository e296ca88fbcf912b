/**
 * Why an adapter dropped or changed something. Agent Lightning's most common complaint is
 * "Length of triplets is 0" with no explanation; every adapter here can say why instead.
 */
export type DiagnosticCode =
  /** No span matched the LLM-call pattern; `details.spanNames` lists what was seen. */
  | "no_llm_span_matched"
  /** A span matched the pattern but no reader could decode it as an LLM call. */
  | "llm_span_unreadable"
  /** A matched LLM call carries no prompt and/or response token ids. */
  | "missing_token_ids"
  /** Token ids were missing on the call span and were taken from a proxy span with the same response id. */
  | "token_ids_joined"
  /** A matched call lies under a reward span and is excluded. */
  | "llm_call_under_reward"
  /** A matched call lies outside any subtree whose agent name matches `agentMatch`. */
  | "llm_call_outside_agent"
  /** A call whose response id was already taken (the same call traced twice). */
  | "duplicate_response_id"
  /** A call nested in an already-taken call, without its own response id. */
  | "nested_llm_call"
  /** Multi-policy training: a call that no declared policy claims (it trains nothing). */
  | "call_without_policy"
  /** A reward span that no call received. */
  | "reward_unmatched"
  /** A reward that went to a call later dropped (e.g. for missing token ids). */
  | "reward_lost_with_call"
  /** Trajectory aggregation: the next prompt does not extend the running context at token k. */
  | "prefix_mismatch"
  /** Logprobs missing for a turn, or not as long as its response ids. */
  | "logprobs_unusable"
  /** A span references a parent that is not in the input; a virtual node stands in. */
  | "missing_parent"
  /** Several root spans; a virtual root joins them. */
  | "virtual_root"
  /** Two spans share one span id; the later one is ignored. */
  | "duplicate_span_id"
  /** Spans whose parent links form a cycle; they are re-attached as roots. */
  | "parent_cycle"
  /** `repairHierarchy` moved a span under the span that encloses it in time. */
  | "reparented"
  /** A proxy LLM span whose token lists are empty. */
  | "proxy_span_without_token_ids"
  /** A kept LLM call without an end time: no reward can be matched to it. */
  | "missing_timestamps"
  /** A message-format conversion dropped part of a span. */
  | "message_conversion";

export type Severity = "info" | "warning" | "error";

export interface Diagnostic {
  code: DiagnosticCode;
  severity: Severity;
  message: string;
  spanId?: string;
  spanName?: string;
  details?: Record<string, unknown>;
}

export interface DiagnosticsReport {
  /** In the order they were found. */
  diagnostics: Diagnostic[];
  /** Count per code. */
  counts: Partial<Record<DiagnosticCode, number>>;
  /** Human-readable summary, one line per code, worst first. */
  summary(): string;
}

const SEVERITY_RANK: Record<Severity, number> = { error: 0, warning: 1, info: 2 };

/** Accumulates diagnostics; adapters share one through composition so the report covers the pipeline. */
export class DiagnosticsCollector {
  readonly diagnostics: Diagnostic[] = [];

  add(
    code: DiagnosticCode,
    severity: Severity,
    message: string,
    extra: { spanId?: string; spanName?: string; details?: Record<string, unknown> } = {},
  ): void {
    this.diagnostics.push({ code, severity, message, ...extra });
  }

  merge(report: DiagnosticsReport | DiagnosticsCollector): void {
    this.diagnostics.push(...report.diagnostics);
  }

  report(): DiagnosticsReport {
    return makeReport(this.diagnostics.slice());
  }
}

export function makeReport(diagnostics: Diagnostic[]): DiagnosticsReport {
  const counts: Partial<Record<DiagnosticCode, number>> = {};
  for (const d of diagnostics) counts[d.code] = (counts[d.code] ?? 0) + 1;
  return {
    diagnostics,
    counts,
    summary: () => summarize(diagnostics),
  };
}

export const emptyReport = (): DiagnosticsReport => makeReport([]);

function summarize(diagnostics: Diagnostic[]): string {
  if (diagnostics.length === 0) return "no issues";
  const byCode = new Map<DiagnosticCode, Diagnostic[]>();
  for (const d of diagnostics) {
    const list = byCode.get(d.code) ?? [];
    list.push(d);
    byCode.set(d.code, list);
  }
  return [...byCode.entries()]
    .sort((a, b) => SEVERITY_RANK[a[1][0]!.severity] - SEVERITY_RANK[b[1][0]!.severity])
    .map(([code, list]) => {
      const first = list[0]!;
      const more = list.length > 1 ? ` (and ${list.length - 1} more)` : "";
      return `${first.severity} ${code} ×${list.length}: ${first.message}${more}`;
    })
    .join("\n");
}
