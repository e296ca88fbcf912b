import type { Span, Triplet } from "@agl/core";
import type { AdapterResult, DiagnosingAdapter } from "./adapter.js";
import { agentNameOf, isRewardSpan } from "./conventions.js";
import { DiagnosticsCollector } from "./diagnostics.js";
import type { LlmCall } from "./llm-call.js";
import { checkSpans, parseOptions, TraceToTripletsOptionsSchema } from "./options.js";
import { AGL_LLM_CALL_PATTERN, isTokenSource, looksLikeLlmCall, readLlmCall } from "./readers/index.js";
import { matchRewards, type RewardMatch, type RewardMatchPolicy } from "./reward-matching.js";
import { type TraceNode, TraceTree } from "./tree.js";

export type SpanPattern = RegExp | string | ((span: Span) => boolean);

export interface TraceToTripletsOptions {
  /** Re-parent spans by time containment before walking (default true). */
  repairHierarchy?: boolean;
  /**
   * Which spans are LLM calls. "auto" (default) accepts Agent Lightning's `openai.chat.completion`
   * and every convention the readers know; a RegExp/string is matched against the span name.
   */
  llmCallMatch?: SpanPattern | "auto";
  /** Only take calls inside a subtree whose agent name matches (default: any). */
  agentMatch?: RegExp | string | null;
  /** Exclude calls under reward spans (graders), default true. */
  excludeLlmCallInReward?: boolean;
  /** Reward-to-call matching (default "firstOccurrence"). */
  rewardMatch?: RewardMatchPolicy;
  /** Drop calls with empty prompt or response token ids (default false: kept with empty lists). */
  skipEmptyTokenSpans?: boolean;
  /** Fill missing token ids from another span with the same response id, e.g. a proxy's (default true). */
  joinTokenIdsByResponseId?: boolean;
  /**
   * A reward may start this many seconds before its call's recorded end (default 0.002). Spans written
   * with different clocks (OTel's performance clock vs `Date.now()`, millisecond truncation) disagree
   * by about a millisecond, which would otherwise hand a reward to the previous call. 0 is Agent
   * Lightning's strict rule.
   */
  clockSkewSeconds?: number;
}

/** Why a span that matched the LLM pattern was not turned into a triplet. */
export type CallDropReason =
  | "unreadable"
  | "under_reward"
  | "outside_agent"
  | "duplicate_response_id"
  | "nested_llm_call"
  | "missing_token_ids";

export interface AnalyzedCall {
  node: TraceNode;
  call: LlmCall | null;
  agentName: string | null;
  kept: boolean;
  dropReason: CallDropReason | null;
  reward: number | null;
}

export interface TraceAnalysis {
  tree: TraceTree;
  /** Every span that matched the LLM pattern, in DFS order, kept or not. */
  calls: AnalyzedCall[];
  rewards: RewardMatch[];
}

const toRegExp = (p: RegExp | string) => (typeof p === "string" ? new RegExp(p) : p);

export function spanMatcher(pattern: SpanPattern | "auto"): (span: Span) => boolean {
  if (pattern === "auto") return looksLikeLlmCall;
  if (typeof pattern === "function") return pattern;
  const re = toRegExp(pattern);
  return (span) => re.test(span.name);
}

/**
 * Spans of one rollout → one triplet per LLM call, with rewards matched to calls
 * (Agent Lightning's TracerTraceToTriplet, readable across instrumentation libraries).
 */
export class TraceToTriplets implements DiagnosingAdapter<Span[], Triplet[]> {
  readonly name = "TraceToTriplets";
  private readonly options: Required<Omit<TraceToTripletsOptions, "agentMatch">> & {
    agentMatch: RegExp | null;
  };
  private readonly isLlmCall: (span: Span) => boolean;

  constructor(options: TraceToTripletsOptions = {}) {
    parseOptions(TraceToTripletsOptionsSchema, options, "options");
    this.options = {
      repairHierarchy: options.repairHierarchy ?? true,
      llmCallMatch: options.llmCallMatch ?? "auto",
      agentMatch: options.agentMatch ? toRegExp(options.agentMatch) : null,
      excludeLlmCallInReward: options.excludeLlmCallInReward ?? true,
      rewardMatch: options.rewardMatch ?? "firstOccurrence",
      skipEmptyTokenSpans: options.skipEmptyTokenSpans ?? false,
      joinTokenIdsByResponseId: options.joinTokenIdsByResponseId ?? true,
      clockSkewSeconds: options.clockSkewSeconds ?? 0.002,
    };
    this.isLlmCall = spanMatcher(this.options.llmCallMatch);
  }

  adapt(spans: Span[]): Triplet[] {
    return this.adaptWithDiagnostics(spans).output;
  }

  adaptWithDiagnostics(spans: Span[]): AdapterResult<Triplet[]> {
    const diagnostics = new DiagnosticsCollector();
    const analysis = this.analyze(spans, diagnostics);
    const triplets = analysis.calls.filter((c) => c.kept).map((c) => toTriplet(c));
    return { output: triplets, diagnostics: diagnostics.report() };
  }

  /** The full decision record (used by `visualize`): every candidate call, why it was kept or dropped, rewards. */
  analyze(spans: Span[], diagnostics = new DiagnosticsCollector()): TraceAnalysis {
    checkSpans(spans);
    const tree = TraceTree.fromSpans(spans, diagnostics);
    if (this.options.repairHierarchy) tree.repairHierarchy(diagnostics);
    // one decode per span: the token-id index and the walk both need it
    const reads = new Map<TraceNode, LlmCall | null>();
    const read = (node: TraceNode): LlmCall | null => {
      let call = reads.get(node);
      if (call === undefined) {
        call = readLlmCall(node.span);
        reads.set(node, call);
      }
      return call;
    };
    const calls = this.collectCalls(tree, read, diagnostics);
    if (calls.length === 0) this.explainNoMatch(tree, diagnostics);

    const rewards = matchRewards(
      tree,
      calls.filter((c) => c.kept),
      this.options.rewardMatch,
      diagnostics,
      this.options.clockSkewSeconds,
    );
    for (const c of calls) {
      if (!c.kept || !c.call) continue;
      if (c.node.span.end_time == null) {
        diagnostics.add(
          "missing_timestamps",
          "warning",
          `LLM call "${c.node.span.name}" has no end time; no reward can be matched to it`,
          {
            spanId: c.node.id,
            spanName: c.node.span.name,
          },
        );
      }
      const missing = !c.call.promptTokenIds?.length || !c.call.responseTokenIds?.length;
      if (!missing) continue;
      const which = [
        !c.call.promptTokenIds?.length && "prompt",
        !c.call.responseTokenIds?.length && "response",
      ]
        .filter(Boolean)
        .join(" and ");
      const hint =
        c.call.family === "genai-old" || c.call.family === "tokens-only"
          ? "ask the server for them (vLLM: return_token_ids: true) or route the agent through @agl/proxy"
          : `the ${c.call.family} instrumentation never records token ids; route the agent through @agl/proxy so its spans (same response id) supply them`;
      if (this.options.skipEmptyTokenSpans) {
        c.kept = false;
        c.dropReason = "missing_token_ids";
        if (c.reward !== null) {
          diagnostics.add(
            "reward_lost_with_call",
            "warning",
            `reward ${c.reward} was matched to a call dropped for missing token ids`,
            {
              spanId: c.node.id,
              spanName: c.node.span.name,
            },
          );
        }
      }
      diagnostics.add(
        "missing_token_ids",
        this.options.skipEmptyTokenSpans ? "error" : "warning",
        `LLM call "${c.node.span.name}" has no ${which} token ids${this.options.skipEmptyTokenSpans ? " (dropped)" : ""}: ${hint}`,
        { spanId: c.node.id, spanName: c.node.span.name, details: { family: c.call.family } },
      );
    }
    return { tree, calls, rewards };
  }

  private collectCalls(
    tree: TraceTree,
    read: (node: TraceNode) => LlmCall | null,
    diagnostics: DiagnosticsCollector,
  ): AnalyzedCall[] {
    const { agentMatch, excludeLlmCallInReward, joinTokenIdsByResponseId } = this.options;
    const tokenIndex = joinTokenIdsByResponseId ? indexTokenSources(tree, read) : null;
    const seen = new Map<string, AnalyzedCall>();
    const out: AnalyzedCall[] = [];
    interface Frame {
      node: TraceNode;
      agentOk: boolean;
      agentName: string | null;
      underReward: boolean;
      insideCall: boolean;
    }
    const stack: Frame[] = [
      {
        node: tree.root,
        agentOk: agentMatch === null,
        agentName: null,
        underReward: false,
        insideCall: false,
      },
    ];
    while (stack.length) {
      const f = stack.pop()!;
      const span = f.node.span;
      const ownAgent = f.node.virtual ? null : agentNameOf(span);
      let taken = false;
      if (!f.node.virtual && this.isLlmCall(span)) {
        const call = read(f.node);
        const entry: AnalyzedCall = {
          node: f.node,
          call,
          agentName: ownAgent ?? f.agentName,
          kept: false,
          dropReason: null,
          reward: null,
        };
        const drop = (
          reason: CallDropReason,
          code: Parameters<DiagnosticsCollector["add"]>[0],
          message: string,
        ) => {
          entry.dropReason = reason;
          diagnostics.add(
            code,
            code === "duplicate_response_id" || code === "nested_llm_call" ? "info" : "warning",
            message,
            {
              spanId: f.node.id,
              spanName: span.name,
            },
          );
        };
        const id = call?.responseId ?? null;
        if (!call)
          drop(
            "unreadable",
            "llm_span_unreadable",
            `span "${span.name}" matched the LLM pattern but carries no messages or token ids any reader knows`,
          );
        else if (excludeLlmCallInReward && f.underReward)
          drop(
            "under_reward",
            "llm_call_under_reward",
            `LLM call "${span.name}" is inside a reward span (a grader call); excluded`,
          );
        else if (!f.agentOk)
          drop(
            "outside_agent",
            "llm_call_outside_agent",
            `LLM call "${span.name}" is not inside an agent matching ${agentMatch} (agent: ${entry.agentName ?? "none"})`,
          );
        else if (id !== null && seen.has(id)) {
          mergeMissing(seen.get(id)!.call!, call);
          drop(
            "duplicate_response_id",
            "duplicate_response_id",
            `response id ${id} was already taken; "${span.name}" is the same call traced twice`,
          );
        } else if (id === null && f.insideCall)
          drop(
            "nested_llm_call",
            "nested_llm_call",
            `"${span.name}" is nested in an LLM call already taken and has no response id of its own`,
          );
        else {
          entry.kept = true;
          taken = true;
          if (id !== null) seen.set(id, entry);
          if (tokenIndex && id !== null && (!call.promptTokenIds || !call.responseTokenIds)) {
            const source = tokenIndex.get(id);
            if (source && source.spanId !== call.spanId) {
              mergeMissing(call, source);
              diagnostics.add(
                "token_ids_joined",
                "info",
                `token ids for "${span.name}" taken from "${source.spanName}" (same response id ${id})`,
                {
                  spanId: f.node.id,
                  spanName: span.name,
                  details: { sourceSpanId: source.spanId },
                },
              );
            }
          }
        }
        out.push(entry);
      }
      const agentOk = agentMatch === null ? true : ownAgent !== null ? agentMatch.test(ownAgent) : f.agentOk;
      const childFrame = {
        agentOk,
        agentName: ownAgent ?? f.agentName,
        underReward: f.underReward || (!f.node.virtual && isRewardSpan(span)),
        insideCall: f.insideCall || taken,
      };
      for (let i = f.node.children.length - 1; i >= 0; i--)
        stack.push({ node: f.node.children[i]!, ...childFrame });
    }
    return out;
  }

  private explainNoMatch(tree: TraceTree, diagnostics: DiagnosticsCollector): void {
    const names = new Map<string, number>();
    for (const node of tree.nodes.values())
      if (!node.virtual) names.set(node.span.name, (names.get(node.span.name) ?? 0) + 1);
    const pattern = this.options.llmCallMatch;
    const described =
      pattern === "auto"
        ? `the known LLM conventions (${AGL_LLM_CALL_PATTERN}, gen_ai.operation.name, openinference, ai.*.doGenerate, langfuse generation)`
        : String(pattern);
    diagnostics.add(
      "no_llm_span_matched",
      "error",
      `no span matched ${described}; span names seen: ${[...names.keys()].join(", ")}. Is the LLM client instrumented (instrumentOpenAI) or routed through @agl/proxy?`,
      { details: { spanNames: Object.fromEntries(names), pattern: String(pattern) } },
    );
  }
}

/** Spans carrying token ids, by response id: lets a client span borrow a proxy span's ids. */
function indexTokenSources(tree: TraceTree, read: (node: TraceNode) => LlmCall | null): Map<string, LlmCall> {
  const index = new Map<string, LlmCall>();
  for (const node of tree.nodes.values()) {
    if (node.virtual || !isTokenSource(node.span)) continue;
    const call = read(node);
    if (call?.responseId && call.promptTokenIds && call.responseTokenIds && !index.has(call.responseId)) {
      index.set(call.responseId, call);
    }
  }
  return index;
}

function mergeMissing(target: LlmCall, source: LlmCall | null): void {
  if (!source) return;
  target.promptTokenIds ??= source.promptTokenIds;
  target.responseTokenIds ??= source.responseTokenIds;
  target.logprobs ??= source.logprobs;
  if (target.input.length === 0) target.input = source.input;
  if (target.output.length === 0) target.output = source.output;
  if (target.tools.length === 0) target.tools = source.tools;
  target.model ??= source.model;
}

function toTriplet(c: AnalyzedCall): Triplet {
  const call = c.call!;
  return {
    prompt: {
      token_ids: call.promptTokenIds ?? [],
      raw_content: call.rawPrompt ?? call.input,
      image_urls: call.imageUrls,
    },
    response: {
      token_ids: call.responseTokenIds ?? [],
      raw_content: call.rawCompletion ?? call.output,
      logprobs: call.logprobs,
    },
    reward: c.reward,
    metadata: {
      request: call.request,
      response: call.response,
      response_id: call.responseId,
      agent_name: c.agentName,
      span_id: call.spanId,
      model: call.model,
      family: call.family,
    },
  };
}
