export {
  type ConformanceContext,
  type ConformanceOptions,
  registryConformance,
  type TestFunction,
  type Unsupported,
} from "./conformance";
