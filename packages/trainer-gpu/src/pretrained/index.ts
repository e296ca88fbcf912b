export {
  type AdapterChoice,
  DEFAULT_ADAPTER,
  type LoraState,
  UnknownAdapterError,
} from "./adapter-rows.js";
export { AdapterView, adapterView } from "./adapter-view.js";
export { BaseModelView } from "./base-view.js";
export { DEFAULT_HEAD_CHUNK_ELEMENTS, headLogProbs } from "./chunked-head.js";
export { PretrainedCheckpointError, type PretrainedErrorCode } from "./errors.js";
export {
  type ExportDtype,
  type ExportPretrainedOptions,
  exportPretrained,
  TOKENIZER_FILES,
} from "./export.js";
export {
  type ArchConfig,
  type HfConfig,
  type ModelType,
  parseHfConfig,
  type RopeConfig,
  SUPPORTED_MODEL_TYPES,
} from "./hf-config.js";
export {
  type GenerationConfig,
  type LoadedPretrained,
  type LoadPretrainedOptions,
  loadPretrained,
} from "./load.js";
export {
  type LoadPretrainedPolicyOptions,
  loadPretrainedPolicy,
  type PretrainedPolicy,
} from "./load-policy.js";
export {
  addLoraAdapter,
  applyLora,
  type LoraOptions,
  loraScale,
  mergeLora,
  removeLoraAdapter,
} from "./lora.js";
export type { LoraSettings } from "./lora-state.js";
export {
  estimateMemory,
  type MemoryAssumptions,
  type MemoryEstimate,
  type MemoryEstimateOptions,
} from "./memory.js";
export {
  type FitOptions,
  fitMicroBatch,
  type MicroBatchFit,
  TrainingMemoryError,
  trainingStepBytes,
  WASM_HEAP_BYTES,
} from "./memory-fit.js";
export {
  ADAPTER_CONFIG_FILE,
  ADAPTER_WEIGHTS_FILE,
  type ExportPeftOptions,
  exportPeftAdapter,
  loadPeftAdapter,
} from "./peft.js";
export { exportPeftAdapters } from "./policy-files.js";
export { PretrainedModel, type PretrainedModelOptions, type TokenScores } from "./pretrained-model.js";
export {
  type RandomCheckpointOptions,
  randomCheckpointConfig,
  writeRandomCheckpoint,
} from "./random-checkpoint.js";
export { type FloatTensor, readSafetensors, readSafetensorsHeader, writeSafetensors } from "./safetensors.js";
export { commonPrefixLength } from "./shared-prefix.js";
export { LINEAR_MODULES, type LinearModule } from "./weights.js";
