export { describeStoreConformance, type StoreConformanceOptions } from "./conformance.js";
export {
  attemptOf,
  expectError,
  makeReadableSpan,
  makeSpan,
  type StoreFactory,
  sleep,
  until,
  withStore,
} from "./helpers.js";
export { describeStoreModel, type StoreModelOptions } from "./model.js";
