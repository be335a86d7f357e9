// The Lua scripts run in Redis: the allocation of a sequence range in one second, and a
// probe. Both first check the namespace's marker, which is how a Redis that restarted, lost its
// data or failed over is detected and fenced before it can hand out a sequence a second time.
import { luaScript, REDIS_TAKEOVER_LUA } from "@leaf/redis-support";

/**
 * Shared opening of both scripts.
 *
 * First the namespace's settings marker (KEYS[#KEYS - 1], a key without the key prefix, so that
 * clients with different prefixes find it): the key prefix, sequence scope and layout of the
 * clients of the namespace. Clients that differ in one of them hand out the same ids (their
 * counters start at 0 for the same seconds, or their bits mean other things), so the first client
 * records its settings and a client with other settings is refused: LEAF_SETTINGS followed by the
 * recorded settings as JSON. ARGV[3] key prefix, ARGV[4] sequence scope, ARGV[5] layout.
 *
 * Then Redis TIME and the marker (KEYS[#KEYS]): the run id and replication id of the Redis process
 * that holds the counters. When the marker is missing (Redis lost its data, or the namespace is
 * new), names another process (a restart, a restore from an older snapshot, a failover), or names
 * this process while it was promoted back from a replica (a failover away and back: it missed the
 * other master's counters), sequences handed out before may be handed out again, so every second up
 * to now + largest clock skew + margin is fenced: allocations for it are refused
 * (REDIS_TAKEOVER_LUA in `@leaf/redis-support` tells). ARGV[1] largest clock skew in ms, ARGV[2]
 * fence margin in ms.
 */
const MARKER_CHECK = `${REDIS_TAKEOVER_LUA}
if redis.replicate_commands then pcall(redis.replicate_commands) end
local settings_key = KEYS[#KEYS - 1]
local marker_key = KEYS[#KEYS]
local max_skew_ms = tonumber(ARGV[1])
local margin_ms = tonumber(ARGV[2])
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local recorded = redis.call('HMGET', settings_key, 'key_prefix', 'sequence_scope', 'layout')
if not recorded[1] and not recorded[2] and not recorded[3] then
  redis.call('HSET', settings_key, 'key_prefix', ARGV[3], 'sequence_scope', ARGV[4],
    'layout', ARGV[5], 'recorded_at_ms', string.format('%.0f', now_ms))
elseif recorded[1] ~= ARGV[3] or recorded[2] ~= ARGV[4] or recorded[3] ~= ARGV[5] then
  return redis.error_reply('LEAF_SETTINGS ' .. cjson.encode({key_prefix = recorded[1] or '',
    sequence_scope = recorded[2] or '', layout = recorded[3] or ''}))
end
local marker = redis.call('HMGET', marker_key, 'run_id', 'fence', 'replid')
local fence = tonumber(marker[2]) or -1
local reason, run_id, replid = leaf_redis_takeover(marker[1], marker[3])
if reason then
  local new_fence = math.floor((now_ms + max_skew_ms + margin_ms) / 1000)
  if new_fence > fence then fence = new_fence end
  redis.call('HSET', marker_key, 'run_id', run_id, 'replid', replid,
    'fence', string.format('%.0f', fence), 'fenced_at_ms', string.format('%.0f', now_ms),
    'reason', reason)
  redis.log(redis.LOG_WARNING, 'leaf redis-sequence: marker ' .. marker_key .. ' ' .. reason ..
    ', refusing seconds up to ' .. string.format('%.0f', fence))
elseif replid ~= marker[3] then
  redis.call('HSET', marker_key, 'replid', replid)
end
`;

/**
 * Allocates a range of sequence numbers for one second.
 * KEYS: counter of the second, its lock, the settings marker, the marker.
 * ARGV: max skew ms, fence margin ms, key prefix, sequence scope, layout, the second (Unix
 * seconds), largest sequence, batch size, counter TTL in s, lock ms, the marker field holding the
 * counter's high-water second.
 *
 * The high-water second is the highest second ever granted for the counter (the namespace's, or
 * one shard's). A second at or below it whose counter is gone is refused: its counter may have
 * expired after handing out ranges, and Redis TIME is back in a second it already served (its
 * clock was stepped back). A second whose counter still exists continues it (INCRBY never repeats).
 * Answers {second, first, last, redis ms, fence second}, or an error reply whose first word is
 * LEAF_SKEW, LEAF_FENCED, LEAF_LOCKED, LEAF_EXHAUSTED, LEAF_BEHIND or LEAF_SETTINGS.
 */
export const ALLOCATE_SCRIPT = `${MARKER_CHECK}
local sequence_key = KEYS[1]
local lock_key = KEYS[2]
local second = tonumber(ARGV[6])
local max_sequence = tonumber(ARGV[7])
local size = tonumber(ARGV[8])
local ttl = tonumber(ARGV[9])
local lock_ms = tonumber(ARGV[10])
local high_field = ARGV[11]
local second_ms = second * 1000
local skew = 0
if now_ms < second_ms then skew = second_ms - now_ms
elseif now_ms > second_ms + 999 then skew = now_ms - second_ms - 999 end
if skew > max_skew_ms then
  return redis.error_reply('LEAF_SKEW ' .. string.format('%.0f %.0f', second, now_ms))
end
if second <= fence then
  return redis.error_reply('LEAF_FENCED ' .. string.format('%.0f %.0f', fence, now_ms))
end
local high = tonumber(redis.call('HGET', marker_key, high_field)) or -1
if second <= high then
  if redis.call('EXISTS', sequence_key) == 0 then
    -- The lowest second that may be granted: the high-water second itself (its counter may still
    -- live), or the next one when that is the second refused here.
    local floor = high
    if second == high then floor = high + 1 end
    redis.log(redis.LOG_WARNING, 'leaf redis-sequence: ' .. sequence_key .. ' refused: second ' ..
      string.format('%.0f', second) .. ' is not above the high-water second ' ..
      string.format('%.0f', high) .. ' and its counter is gone (the clock went back?)')
    return redis.error_reply('LEAF_BEHIND ' .. string.format('%.0f %.0f %.0f', floor, now_ms, high))
  end
else
  redis.call('HSET', marker_key, high_field, string.format('%.0f', second))
end
local lock_ttl = redis.call('PTTL', lock_key)
if lock_ttl > 0 then
  return redis.error_reply('LEAF_LOCKED ' .. string.format('%.0f %.0f %.0f', second, lock_ttl, now_ms))
end
local counter = redis.call('INCRBY', sequence_key, size)
redis.call('EXPIRE', sequence_key, ttl)
local first = counter - size
if first > max_sequence then
  redis.call('PSETEX', lock_key, lock_ms, 'exhausted')
  return redis.error_reply('LEAF_EXHAUSTED ' .. string.format('%.0f %.0f', second, now_ms))
end
local last = counter - 1
if last >= max_sequence then
  last = max_sequence
  redis.log(redis.LOG_WARNING, 'leaf redis-sequence: ' .. sequence_key .. ' used up, locking for ' .. lock_ms .. ' ms')
  redis.call('PSETEX', lock_key, lock_ms, 'exhausted')
end
return {second, first, last, now_ms, fence}
`;

/**
 * Reads Redis TIME and the fence, after the settings and marker checks.
 * KEYS: the settings marker, the marker. ARGV: max skew ms, fence margin ms, key prefix, sequence
 * scope, layout. Answers {redis ms, fence second, run id}.
 */
export const PROBE_SCRIPT = `${MARKER_CHECK}
return {now_ms, fence, run_id}
`;

const script = luaScript;

/** The allocation script. */
export const allocateScript = script(ALLOCATE_SCRIPT);
/** The probe script. */
export const probeScript = script(PROBE_SCRIPT);

/** The answers of the allocation script that are refusals, not failures. */
export type Refusal =
  | { kind: "skew"; second: number; redisMs: number }
  | { kind: "fenced"; fence: number; redisMs: number }
  | { kind: "locked"; second: number; lockTtlMs: number; redisMs: number }
  | { kind: "exhausted"; second: number; redisMs: number }
  | { kind: "behind"; floor: number; redisMs: number; highWater: number };

/** Reads a LEAF_* error reply of the allocation script; undefined for any other message. */
export function parseRefusal(message: string): Refusal | undefined {
  const match =
    /^(LEAF_SKEW|LEAF_FENCED|LEAF_LOCKED|LEAF_EXHAUSTED|LEAF_BEHIND) (-?\d+) (-?\d+)(?: (-?\d+))?/.exec(
      message,
    );
  if (!match) return undefined;
  const a = Number(match[2]);
  const b = Number(match[3]);
  switch (match[1]) {
    case "LEAF_SKEW":
      return { kind: "skew", second: a, redisMs: b };
    case "LEAF_FENCED":
      return { kind: "fenced", fence: a, redisMs: b };
    case "LEAF_LOCKED":
      return { kind: "locked", second: a, lockTtlMs: b, redisMs: Number(match[4]) };
    case "LEAF_BEHIND":
      return { kind: "behind", floor: a, redisMs: b, highWater: Number(match[4]) };
    default:
      return { kind: "exhausted", second: a, redisMs: b };
  }
}

/** The settings a namespace's settings marker records (see MARKER_CHECK). */
export interface RecordedSettings {
  keyPrefix: string;
  sequenceScope: string;
  layout: string;
}

/**
 * Reads the LEAF_SETTINGS error reply of either script: the settings recorded for the namespace,
 * which differ from the client's. Undefined for any other message.
 */
export function parseSettingsRefusal(message: string): RecordedSettings | undefined {
  const match = /^LEAF_SETTINGS (\{.*\})$/s.exec(message);
  if (!match) return undefined;
  let recorded: Record<string, unknown>;
  try {
    recorded = JSON.parse(match[1]!) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  return {
    keyPrefix: String(recorded.key_prefix ?? ""),
    sequenceScope: String(recorded.sequence_scope ?? ""),
    layout: String(recorded.layout ?? ""),
  };
}
