// The Lua scripts run in Redis: the allocation of a sequence range in one second (seed 002), and a
// probe. Both first check the namespace's marker, which is how a Redis that restarted, lost its
// data or failed over is detected and fenced before it can hand out a sequence a second time.
import { createHash } from "node:crypto";

/**
 * Shared opening of both scripts. Reads Redis TIME and the run id of the Redis process, and
 * compares the run id with the one stored in the marker (KEYS[#KEYS]). When the marker is missing
 * (Redis lost its data, or the namespace is new) or names another process (a restart, a restore
 * from an older snapshot, a failover), sequences handed out before may be handed out again, so
 * every second up to now + largest clock skew + margin is fenced: allocations for it are refused.
 * ARGV[1] largest clock skew in ms, ARGV[2] fence margin in ms.
 */
const MARKER_CHECK = `
if redis.replicate_commands then pcall(redis.replicate_commands) end
local marker_key = KEYS[#KEYS]
local max_skew_ms = tonumber(ARGV[1])
local margin_ms = tonumber(ARGV[2])
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local run_id = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)') or 'unknown'
local marker = redis.call('HMGET', marker_key, 'run_id', 'fence')
local fence = tonumber(marker[2]) or -1
if marker[1] ~= run_id then
  local reason = 'missing'
  if marker[1] then reason = 'restarted' end
  local new_fence = math.floor((now_ms + max_skew_ms + margin_ms) / 1000)
  if new_fence > fence then fence = new_fence end
  redis.call('HSET', marker_key, 'run_id', run_id, 'fence', string.format('%.0f', fence),
    'fenced_at_ms', string.format('%.0f', now_ms), 'reason', reason)
  redis.log(redis.LOG_WARNING, 'leaf redis-sequence: marker ' .. marker_key .. ' ' .. reason ..
    ', refusing seconds up to ' .. string.format('%.0f', fence))
end
`;

/**
 * Allocates a range of sequence numbers for one second.
 * KEYS: counter of the second, its lock, the marker.
 * ARGV: max skew ms, fence margin ms, the second (Unix seconds), largest sequence, batch size,
 * counter TTL in s, lock ms.
 * Answers {second, first, last, redis ms, fence second}, or an error reply whose first word is
 * LEAF_SKEW, LEAF_FENCED, LEAF_LOCKED or LEAF_EXHAUSTED followed by numbers.
 */
export const ALLOCATE_SCRIPT = `${MARKER_CHECK}
local sequence_key = KEYS[1]
local lock_key = KEYS[2]
local second = tonumber(ARGV[3])
local max_sequence = tonumber(ARGV[4])
local size = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local lock_ms = tonumber(ARGV[7])
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
 * Reads Redis TIME and the fence, after the marker check.
 * KEYS: the marker. ARGV: max skew ms, fence margin ms.
 * Answers {redis ms, fence second, run id}.
 */
export const PROBE_SCRIPT = `${MARKER_CHECK}
return {now_ms, fence, run_id}
`;

/** A script and its SHA-1, for EVALSHA. */
export interface LuaScript {
  readonly source: string;
  readonly sha: string;
}

function script(source: string): LuaScript {
  return Object.freeze({ source, sha: createHash("sha1").update(source).digest("hex") });
}

/** The allocation script. */
export const allocateScript = script(ALLOCATE_SCRIPT);
/** The probe script. */
export const probeScript = script(PROBE_SCRIPT);

/** The answers of the allocation script that are refusals, not failures. */
export type Refusal =
  | { kind: "skew"; second: number; redisMs: number }
  | { kind: "fenced"; fence: number; redisMs: number }
  | { kind: "locked"; second: number; lockTtlMs: number; redisMs: number }
  | { kind: "exhausted"; second: number; redisMs: number };

/** Reads a LEAF_* error reply of the allocation script; undefined for any other message. */
export function parseRefusal(message: string): Refusal | undefined {
  const match =
    /^(LEAF_SKEW|LEAF_FENCED|LEAF_LOCKED|LEAF_EXHAUSTED) (-?\d+) (-?\d+)(?: (-?\d+))?/.exec(
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
    default:
      return { kind: "exhausted", second: a, redisMs: b };
  }
}
