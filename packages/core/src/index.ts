export { type BackoffOptions, backoffDelay, delay } from "./backoff";
export { type CachedGeneratorOptions, CachedSnowflakeGenerator } from "./cached-generator";
export { type Clock, ManualClock, systemClock } from "./clock";
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
export {
  type CachedLease,
  type ClockCheck,
  checkClockNotBehind,
  readLeaseCache,
  writeFileAtomic,
  writeLeaseCache,
} from "./lease-cache";
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
  type SnowflakeWorker,
  type SnowflakeWorkerEvent,
  type SnowflakeWorkerOptions,
  startSnowflakeWorker,
} from "./snowflake-worker";

// Helpers the registries and stores share (see the README's "Helpers for adapters").

export {
  type AcquireRequestLimits,
  type CheckedAcquireRequest,
  checkAcquireRequest,
  checkLeaseUsable,
  checkReport,
  checkReportedTimestamp,
} from "./acquire-request";
export {
  acquireLockFile,
  acquireLockFileWaiting,
  type HeldLockFile,
  type LockFileAttempt,
  type LockFileOptions,
  type LockFileOwner,
  type LockFileWaitOptions,
  readLockFile,
  tryAcquireLockFile,
} from "./lock-file";
export {
  type MysqlHost,
  type MysqlUrlOptions,
  type ParsedMysqlUrl,
  parseMysqlUrl,
  redactMysqlUrl,
} from "./mysql-url";
