/**
 * @agl/adapter: spans → training data. Triplets (one per LLM call, rewards matched), trajectories
 * (consecutive calls merged with observation masks), chat messages for fine-tuning / prompt
 * optimisation — from spans of any TypeScript instrumentation — each with a diagnostics report.
 */
export {
  type Adapter,
  type AdapterContext,
  type AdapterResult,
  type DiagnosingAdapter,
  defineAdapter,
  each,
  filter,
  groupBy,
  map,
  pipe,
  runAdapter,
} from "./adapter.js";
export { flattenAttributes, unflattenPrefix } from "./attributes.js";
export {
  agentNameOf,
  attrs,
  finalReward,
  isRewardSpan,
  rewardOf,
} from "./conventions.js";
export {
  type Diagnostic,
  type DiagnosticCode,
  DiagnosticsCollector,
  type DiagnosticsReport,
  type Severity,
} from "./diagnostics.js";
export {
  type ChatMessage,
  type ContentPart,
  type LlmCall,
  type LlmCallFamily,
  normalizeMessage,
  type ToolCall,
  type ToolDefinition,
} from "./llm-call.js";
export { type PolicyRule, type PolicyRules, policyOf, withPolicies } from "./policy-triplets.js";
export { ProxySpansToTriplets, type ProxySpansToTripletsOptions } from "./proxy-spans-to-triplets.js";
export { parsePythonLiteral } from "./python-literal.js";
export {
  AGL_LLM_CALL_PATTERN,
  isTokenSource,
  looksLikeLlmCall,
  readLlmCall,
  readTokenFields,
} from "./readers/index.js";
export type { RewardMatch, RewardMatchPolicy } from "./reward-matching.js";
export { type MessagesExample, TraceToMessages, type TraceToMessagesOptions } from "./trace-to-messages.js";
export {
  type AnalyzedCall,
  type CallDropReason,
  type SpanPattern,
  type TraceAnalysis,
  TraceToTriplets,
  type TraceToTripletsOptions,
} from "./trace-to-triplets.js";
export {
  type PrefixMismatch,
  type TrajectoryOptions,
  type TrajectorySequence,
  TripletsToTrajectories,
} from "./trajectory.js";
export { type TraceNode, TraceTree, VIRTUAL_ROOT_ID, VIRTUAL_SPAN_NAME } from "./tree.js";
export {
  type VisualizeOptions,
  type VisualizeSpansOptions,
  visualize,
  visualizeSpans,
} from "./visualize.js";
