// @leaf/conformance: the vitest suites every adapter of ours and of third parties runs unchanged,
// one per contract, all with one shape: `suite(test, { name, create, ...capabilities })`. Also on
// the subpaths `@leaf/conformance/registry` and `@leaf/conformance/segment-store`.
export {
  type ClosePausedOptions,
  type PausedOutcome,
  type RegistryConformanceOptions,
  registryClosePausedConformance,
  registryConformance,
} from "./registry";
export {
  type SegmentStoreClosePausedOptions,
  type SegmentStoreConformanceOptions,
  type SegmentStoreDurabilityOptions,
  segmentStoreClosePausedConformance,
  segmentStoreConformance,
  segmentStoreDurabilityConformance,
  type WriteFault,
} from "./segment-store";
export {
  type Capability,
  type ConformanceContext,
  isUnsupported,
  type TestFunction,
  type Unsupported,
} from "./shared";
