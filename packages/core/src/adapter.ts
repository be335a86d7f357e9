// `@leaf/core/adapter`: what registry and store adapters build on (the lease core, the renewing lease
// and its timing checks, request checks, lock files, lease cache files, MySQL URLs and errors). Not
// for applications: `@leaf/core` is their entry.
export {
  type AcquireRequestLimits,
  type CheckedAcquireRequest,
  checkAcquireRequest,
  checkReport,
  checkReportedTimestamp,
} from "./acquire-request";
export { type Backend, type BackendRules, checkBackend } from "./backend-option";
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
  classifyMysqlError,
  describeMysqlError,
  type MysqlErrorContext,
  type MysqlErrorInfo,
  type MysqlErrorKind,
  type MysqlFixes,
  mysqlError,
} from "./mysql-errors";
export {
  type MysqlHost,
  type MysqlUrlOptions,
  type ParsedMysqlUrl,
  parseMysqlUrl,
  redactMysqlUrl,
} from "./mysql-url";
export {
  judgeRedisEviction,
  policyMayEvict,
  type RedisEvictionContext,
  type RedisEvictionFinding,
  type RedisEvictionSettings,
  type RedisSettingsReader,
  readRedisEviction,
} from "./redis-eviction";
export {
  describeRedisUrl,
  isRedisScriptClient,
  isRedisWriteRefusal,
  type LuaScript,
  luaScript,
  parseRedisUrl,
  planRedis,
  REDIS_CLUSTER_SLOTS_REFRESH_MS,
  REDIS_TAKEOVER_LUA,
  REDIS_URL_EXPECTED,
  type RedisClusterDefaults,
  type RedisPlan,
  type RedisScriptClient,
  redisClusterDefaults,
  redisFailurePhrase,
  runRedisScript,
  TimeLimitError,
  withTimeLimit,
} from "./redis-link";
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
