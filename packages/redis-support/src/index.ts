// `@leaf/redis-support`: what the Redis adapters (registry-redis, redis-sequence) share, kept here
// once so that @leaf/core knows no backend: the one RedisLink, its failures as Leaf errors, scripts
// by SHA, the takeover script, URLs, time limits and the eviction-policy check.
export { type RedisCallErrorContext, redisCallError } from "./call-error";
export { RedisLink, type RedisLinkOptions } from "./connection";
export { checkRedisKeyPrefix, checkRedisNamespace } from "./key-names";
export {
  checkEvictionMode,
  enforceRedisEviction,
  judgeRedisEviction,
  policyMayEvict,
  type RedisEvictionCheck,
  type RedisEvictionContext,
  type RedisEvictionFinding,
  type RedisEvictionSettings,
  type RedisEvictionWarning,
  type RedisSettingsReader,
  readRedisEviction,
} from "./redis-eviction";
export {
  describeRedisUrl,
  isRedisAuthRefusal,
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
