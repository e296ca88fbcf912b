/**
 * @agl/apo: automatic prompt optimisation (textual gradients + beam search) as an Algorithm for the
 * @agl/core Trainer, with its prompt versions, scores and optimiser calls kept in the store.
 */
export { APO, type ApoResult, type ApoRoundReport } from "./apo.js";
export {
  batches,
  meanReward,
  type RandomSource,
  sample,
  sampleParents,
  selectBeam,
  shuffled,
} from "./beam.js";
export type { BeamEntry } from "./candidate-step.js";
export {
  bestOf,
  bestPrompt,
  type FormatHistoryOptions,
  formatPromptHistory,
  loadPromptHistory,
  promptDiff,
} from "./history.js";
export {
  type ChatTurn,
  DEFAULT_EDIT_INSTRUCTIONS,
  DEFAULT_GRADIENT_INSTRUCTIONS,
  type EditInput,
  type EditInstruction,
  type Experiment,
  type GradientInput,
  type GradientInstruction,
  renderConversation,
} from "./instructions.js";
export {
  APO_METADATA_KEY,
  type PromptHistory,
  type PromptVersion,
  type RejectedRecord,
  type RunRecord,
  type ScoreEntry,
  type ScoreSplit,
  type VersionRecord,
} from "./journal.js";
export { type ApoOptions, ApoOptionsSchema } from "./options.js";
export type { ApoProblem, ProblemCounts } from "./problems.js";
export {
  type CandidateRejection,
  type CandidateVerdict,
  checkCandidate,
  extractPrompt,
  templateVariables,
} from "./template-check.js";
