// Public entry of @leaf/redis-sequence, the Redis Lua shard sequence: ids with shard bits whose
// per-second sequences are allocated in ranges by a Lua script in Redis, fenced after a Redis
// restart.
export {
  checkSequenceLayout,
  type ParsedSequenceId,
  SequenceIdFormat,
  type SequenceIdFormatOptions,
} from "./id-format";
export { type SequenceKeys, sequenceKeys } from "./keys";
export { ALLOCATE_SCRIPT, PROBE_SCRIPT } from "./lua-scripts";
export type {
  RedisClient,
  RedisSequenceOptions,
  RedisSequenceWarning,
  RedisUrl,
} from "./options";
export { RedisSequence } from "./redis-sequence";
export type { RedisSequenceState, SlotState } from "./state";
