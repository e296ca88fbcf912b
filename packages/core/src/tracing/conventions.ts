/** Span names and attribute keys of Agent Lightning v0.3 (spec §4), shared by emitters, readers and adapters. */
export const SPAN_NAMES = {
  annotation: "agentlightning.annotation",
  message: "agentlightning.message",
  object: "agentlightning.object",
  exception: "agentlightning.exception",
  operation: "agentlightning.operation",
  virtual: "agentlightning.virtual",
  /** v0.2's reward span; read for compatibility, never written. */
  rewardV02: "agentlightning.reward",
  openaiChat: "openai.chat.completion",
} as const;

export const ATTR = {
  rewardPrefix: "agentlightning.reward",
  messageBody: "agentlightning.message.body",
  objectType: "agentlightning.object.type",
  objectLiteral: "agentlightning.object.literal",
  objectJson: "agentlightning.object.json",
  operationName: "agentlightning.operation.name",
  operationInput: "agentlightning.operation.input",
  operationOutput: "agentlightning.operation.output",
  linkPrefix: "agentlightning.link",
  tagPrefix: "agentlightning.tag",
  exceptionType: "exception.type",
  exceptionMessage: "exception.message",
  exceptionEscaped: "exception.escaped",
  exceptionStacktrace: "exception.stacktrace",
} as const;

/** Resource attribute keys stamped on every stored span. */
export const RESOURCE_ATTR = {
  rolloutId: "agentlightning.rollout_id",
  attemptId: "agentlightning.attempt_id",
  spanSequenceId: "agentlightning.span_sequence_id",
  tracerName: "agentlightning.tracer.name",
} as const;

/** Reward dimension `i` keys: `agentlightning.reward.<i>.name` / `.value`. */
export const rewardNameKey = (i: number): string => `${ATTR.rewardPrefix}.${i}.name`;
export const rewardValueKey = (i: number): string => `${ATTR.rewardPrefix}.${i}.value`;
