// `@leaf/core/adapter`: what registry and store adapters build on (the lease core, the renewing
// lease and its timing checks, request and ms option checks, lock files, lease cache files). Not
// for applications: `@leaf/core` is their entry. What one driver's adapters share is in
// @leaf/mysql-support, @leaf/postgres-support and @leaf/redis-support: core knows no backend.
export {
  type AcquireRequestLimits,
  type CheckedAcquireRequest,
  checkAcquireRequest,
  checkReport,
  checkReportedTimestamp,
} from "./acquire-request";
export { type Backend, type BackendRules, checkBackend } from "./backend-option";
export {
  type DatabaseErrorKind,
  type DatabaseErrorParts,
  databaseError,
  databaseErrorCode,
} from "./database-errors";
export { bareMessage } from "./errors";
export {
  type HostListUrlRules,
  type ParsedHostListUrl,
  parseHostListUrl,
  redactUrl,
} from "./host-list-url";
export {
  type CachedLease,
  type ClockCheck,
  checkClockNotBehind,
  readLeaseCache,
  writeFileAtomic,
  writeLeaseCache,
} from "./lease-cache";
export {
  LeaseCore,
  type LeaseGrant,
  type LeaseLostOptions,
  type LoseOptions,
  leaseLostError,
} from "./lease-core";
export {
  type GrantLeasedIdsOptions,
  grantLeasedIds,
  type LeasedIdRows,
  type LeasedIdsGrant,
  LeasedIdsLease,
  type LeasedIdsSettings,
  type LeasedIdTable,
} from "./leased-ids";
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
export { nonNegativeMs, positiveMs } from "./ms-options";
export {
  checkLeaseTimings,
  type FenceReason,
  type LeaseTimingOptions,
  type LeaseTimings,
  type RenewalConfirmed,
  type RenewalSchedule,
  RenewingLease,
} from "./renewing-lease";
export { type SoonestLease, workerIdsExhaustedError } from "./worker-ids-exhausted";
