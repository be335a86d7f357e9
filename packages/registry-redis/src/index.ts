export { ACQUIRE_SCRIPT, RELEASE_SCRIPT, RENEW_SCRIPT } from "./lua-scripts";
export { RedisLease, type RegistryKeys, registryKeys } from "./redis-lease";
export {
  RedisRegistry,
  type RedisRegistryOptions,
  type RedisRegistryTimings,
  type RedisRegistryWarning,
} from "./redis-registry";
