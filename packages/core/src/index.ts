export { type BackoffOptions, backoffDelay, delay } from "./backoff";
export { type CachedGeneratorOptions, CachedSnowflakeGenerator } from "./cached-generator";
export { type Clock, ManualClock, systemClock } from "./clock";
// Helpers for registry and store adapters live in `@leaf/core/adapter` (src/adapter.ts).
export {
  argumentError,
  configError,
  describeValue,
  type ErrorCode,
  ErrorCodes,
  isLeafError,
  LeafCodes,
  LeafError,
  type LeafErrorOptions,
} from "./errors";
export { FriendlyIdFormat, type FriendlyIdOptions } from "./friendly-id";
export {
  type IdAlphabet,
  IdEncoding,
  type IdEncodingOptions,
  type IdStringForm,
} from "./id-encoding";
export {
  type DecodedId,
  defineLayout,
  type IdParts,
  type Layout,
  type LayoutName,
  type LayoutOptions,
  layouts,
  parseId,
} from "./layout";
export { type LayoutFacts, layoutFacts, layoutTable } from "./layout-table";
export {
  MemoryRegistry,
  type MemoryRegistryOptions,
  MemoryRegistryStore,
} from "./memory-registry";
export { localIPv4 } from "./net";
export type {
  AcquireRequest,
  BackupWorker,
  NodeIdentity,
  WorkerIdRegistry,
  WorkerLease,
} from "./registry";
export { MAX_SAFE_ID, toSafeNumber, unsafeIntegerError } from "./safe-number";
export {
  type ClockRollbackEvent,
  type GeneratorState,
  type GeneratorTimestamps,
  type GeneratorWarning,
  type LeaseDeadline,
  SnowflakeGenerator,
  type SnowflakeOptions,
} from "./snowflake-generator";
export {
  SnowflakeWorker,
  type SnowflakeWorkerEvent,
  type SnowflakeWorkerOptions,
  type SnowflakeWorkerState,
} from "./snowflake-worker";
