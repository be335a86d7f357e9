// `@leaf/segment-redis`: the Redis segment store for `@leaf/segment`.
export {
  type LiftOutcome,
  type RedisNamespaceState,
  RedisSegmentStore,
  type RedisStoreStats,
} from "./redis-store";
export {
  type RedisSegmentStoreOptions,
  type RedisStoreWarning,
  type StoreKeys,
  storeKeys,
} from "./redis-store-options";
