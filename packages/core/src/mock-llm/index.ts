export {
  evaluateArithmetic,
  habitsFromPrompt,
  type InstructionFollowerHabits,
  instructionFollowingAnswer,
  instructionFollowingResponder,
  promptText,
} from "./instruction-following.js";
export { MockLLMServerOptionsSchema } from "./options.js";
export {
  type MockLLMServer,
  type MockLLMServerOptions,
  type MockReply,
  type MockRequestInfo,
  startMockLLMServer,
} from "./server.js";
export { mockDecode, mockEncode, mockLogprob } from "./tokens.js";
