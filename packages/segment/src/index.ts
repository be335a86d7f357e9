export { type DynamicStepOptions, nextDynamicStep, resolveDynamicStep } from "./dynamic-step";
export {
  EmbeddedSegmentStore,
  type EmbeddedSegmentStoreOptions,
  type EmbeddedStoreStats,
  JOURNAL_FILE,
  LOCK_FILE,
} from "./embedded-store";
export {
  HIGH_WATER_FILE,
  HIGH_WATER_LOCK,
  HighWaterMarks,
  type HighWaterOptions,
} from "./high-water";
export {
  MemorySegmentData,
  MemorySegmentStore,
  type MemorySegmentStoreOptions,
} from "./memory-store";
export {
  type FormResidueSetOptions,
  formResidueSet,
  type ResidueSetReport,
} from "./residue-set";
export {
  type MemberErrorContext,
  type ResidueMemberStatus,
  ResidueSegmentStore,
  type ResidueSegmentStoreOptions,
} from "./residue-store";
export type { RangeSnapshot } from "./segment-buffer";
export {
  type EagerLoadOptions,
  type GeneratorErrorContext,
  type GeneratorStatus,
  type GiveBackOutcome,
  type PrefetchOptions,
  type SegmentGeneratorOptions,
  SegmentIdGenerator,
  type TagSnapshot,
} from "./segment-generator";
export type {
  NewTag,
  RangeResidue,
  ResidueRecord,
  SegmentRange,
  SegmentStore,
  TagRecord,
} from "./segment-store";
export {
  checkTag,
  isValidTag,
  MAX_ID,
  MAX_STEP,
  MAX_TAG_LENGTH,
  type RangeRefusal,
} from "./validation";
