// Subpath `@leaf/conformance/segment-store`: the suites every segment store (`SegmentStore` of
// @leaf/segment) runs unchanged, the contract one and the durability one under a real write fault.

export {
  type SegmentStoreClosePausedOptions,
  segmentStoreClosePausedConformance,
} from "./segment-store-close-paused";
export {
  type SegmentStoreDurabilityOptions,
  segmentStoreDurabilityConformance,
  type WriteFault,
} from "./segment-store-durability";
export {
  type SegmentStoreConformanceOptions,
  segmentStoreConformance,
} from "./segment-store-suite";
export type {
  Capability,
  ConformanceContext,
  TestFunction,
  Unsupported,
} from "./shared";
