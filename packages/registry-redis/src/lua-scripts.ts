// The Lua scripts that decide who holds a worker id. Each runs atomically in Redis, judged by Redis
// TIME: take the lowest free ids, renew only while the holder's token matches, release. Every id's
// highest timestamp stays in the stamps hash after its lease ends, and the marker guards against a
// Redis that restarted without its data (see MARKER).
import { luaScript, REDIS_TAKEOVER_LUA } from "@leaf/redis-support";

const script = luaScript;

/**
 * Opening of every script: Redis TIME in ms. KEYS[1] leases (hash: id -> JSON of the holder's
 * token `t`, lease end `e` by Redis TIME, horizon `h`, ip, port), KEYS[2] stamps (hash: id -> the
 * highest timestamp ever reported or fenced for it, kept after release), KEYS[3] the marker.
 */
const PRELUDE = `
if redis.replicate_commands then pcall(redis.replicate_commands) end
local leases_key, stamps_key, marker_key = KEYS[1], KEYS[2], KEYS[3]
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local function ms(n) return string.format('%.0f', n) end
`;

/**
 * The marker (acquire only): the run id and the replication id of the Redis process that holds the
 * name's leases. When it names another process (a restart or a restore: leases taken since the
 * snapshot are gone), or is missing while this process started less than a lease ago (a restart
 * that lost everything) or was promoted from a replica (a failover that may have missed the last
 * leases), or names this process with another replication id while this process was promoted from
 * a replica (a failover away from it and back: it missed the renewals made on the other master
 * while it was a replica), a holder of the old data may still be issuing ids without a trace here.
 * Such a holder fences itself at most one lease after its last renewal, which was before this
 * process took over; so no id is granted until one lease after the takeover (the quarantine), and
 * every id granted after it starts at or after that instant (the floor, ms since the epoch by Redis
 * TIME). ARGV[1] lease ms. How a restart or promotion is told: `REDIS_TAKEOVER_LUA` in
 * `@leaf/redis-support`, shared with the redis sequence.
 */
const MARKER = `${REDIS_TAKEOVER_LUA}
local lease_ms = tonumber(ARGV[1])
local marker = redis.call('HMGET', marker_key, 'run_id', 'floor', 'quarantine_until', 'replid')
local floor = tonumber(marker[2]) or 0
local quarantine = tonumber(marker[3]) or 0
local reason, run_id, replid, uptime_ms = leaf_redis_takeover(marker[1], marker[4])
if reason then
  local until_ms = now_ms + lease_ms
  if reason == 'missing' then until_ms = now_ms - uptime_ms + lease_ms end
  -- The floor is raised even when that instant is past (the first call came a lease or more after
  -- a restart): the stamps are gone, so it is all that keeps a holder whose clock lags Redis's
  -- from starting before the ids an old holder issued by a clock ahead.
  if until_ms > floor then floor = until_ms end
  if until_ms > now_ms then
    if until_ms > quarantine then quarantine = until_ms end
    redis.log(redis.LOG_WARNING, 'leaf registry-redis: marker ' .. marker_key .. ' ' .. reason ..
      ': no worker id granted before ' .. ms(quarantine) .. ', none starts before it')
  end
  redis.call('HSET', marker_key, 'run_id', run_id, 'replid', replid, 'floor', ms(floor),
    'quarantine_until', ms(quarantine), 'reason', reason, 'noticed_at_ms', ms(now_ms))
elseif replid ~= marker[4] then
  redis.call('HSET', marker_key, 'replid', replid)
end
`;

/**
 * Takes the `need` lowest free ids in 0..max, all or none, or exactly the requested id. A lease is
 * free when missing or ended by Redis TIME; taking an ended one folds its holder's horizon into the
 * id's stamp first.
 * ARGV: lease ms, token, need, max worker id, horizon (the taker's clock + lease), ip, port, the
 * requested id ('' for the lowest free ones; need is then 1). The horizon stored is at most Redis
 * TIME + lease (see RENEW_SCRIPT).
 * Replies: {'ok', floor, horizon, id1, stamp1, id2, stamp2, ...} (stamps already raised to the
 * floor); {'wait', ms, reason} during a quarantine; {'exhausted', soonest id, ms left, ip, port}
 * (or just {'exhausted'} when max is below 0); {'in_use', id, ms left, ip, port} when the requested
 * id is leased.
 */
export const ACQUIRE_SCRIPT = script(`${PRELUDE}${MARKER}
if now_ms < quarantine then
  return {'wait', ms(quarantine - now_ms), redis.call('HGET', marker_key, 'reason') or ''}
end
local token, need, max_id = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local horizon, ip, port = tonumber(ARGV[5]), ARGV[6], ARGV[7]
if horizon > now_ms + lease_ms then horizon = now_ms + lease_ms end
local requested = tonumber(ARGV[8])
local first_id, last_id = 0, max_id
if requested then first_id, last_id = requested, requested end
local free, old = {}, {}
local soonest_id, soonest_end, soonest
for id = first_id, last_id do
  local raw = redis.call('HGET', leases_key, id)
  local lease = raw and cjson.decode(raw)
  if not lease or tonumber(lease.e) < now_ms then
    free[#free + 1] = id
    old[#old + 1] = lease or false
    if #free == need then break end
  elseif not soonest_end or tonumber(lease.e) < soonest_end then
    soonest_id, soonest_end, soonest = id, tonumber(lease.e), lease
  end
end
if #free < need then
  if requested and soonest then
    return {'in_use', requested, ms(soonest_end - now_ms), soonest.ip or '', soonest.port or ''}
  end
  if not soonest then return {'exhausted'} end
  return {'exhausted', soonest_id, ms(soonest_end - now_ms), soonest.ip or '', soonest.port or ''}
end
local reply = {'ok', ms(floor), ms(horizon)}
for i, id in ipairs(free) do
  local stamp = tonumber(redis.call('HGET', stamps_key, id)) or 0
  if old[i] and tonumber(old[i].h) and tonumber(old[i].h) > stamp then
    stamp = tonumber(old[i].h)
    redis.call('HSET', stamps_key, id, ms(stamp))
  end
  redis.call('HSET', leases_key, id, cjson.encode({t = token, e = ms(now_ms + lease_ms),
    h = ms(horizon), ip = ip, port = port, since = ms(now_ms)}))
  if floor > stamp then stamp = floor end
  reply[#reply + 1] = id
  reply[#reply + 1] = ms(stamp)
end
return reply
`);

/**
 * Renews the holder's ids, only while every one still carries its token: the lease ends a lease
 * from now (Redis TIME), the horizon and the stamps rise (never fall). The horizon is capped at
 * Redis TIME + lease: a holder whose clock runs ahead of Redis's gets no horizon past what a
 * quarantine after a data loss waits out (its floor is Redis TIME + lease at the takeover), so it
 * stops issuing rather than reach timestamps a later holder may be granted from.
 * ARGV: lease ms, token, horizon, then pairs of id and timestamp.
 * Replies: {'ok', horizon stored by this renewal (capped)}; {'lost', id, 'gone'} (no lease:
 * released, expired and cleared, or Redis lost it); {'lost', id, 'taken', ip, port} (another
 * holder's token).
 */
export const RENEW_SCRIPT = script(`${PRELUDE}
local lease_ms, token, horizon = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
if horizon > now_ms + lease_ms then horizon = now_ms + lease_ms end
local held = {}
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  local raw = redis.call('HGET', leases_key, id)
  if not raw then return {'lost', id, 'gone'} end
  local lease = cjson.decode(raw)
  if lease.t ~= token then return {'lost', id, 'taken', lease.ip or '', lease.port or ''} end
  held[#held + 1] = {id, lease, tonumber(ARGV[i + 1])}
end
for _, entry in ipairs(held) do
  local id, lease, stamp = entry[1], entry[2], entry[3]
  lease.e = ms(now_ms + lease_ms)
  if horizon > (tonumber(lease.h) or 0) then lease.h = ms(horizon) end
  redis.call('HSET', leases_key, id, cjson.encode(lease))
  if stamp > (tonumber(redis.call('HGET', stamps_key, id)) or 0) then
    redis.call('HSET', stamps_key, id, ms(stamp))
  end
end
return {'ok', ms(horizon)}
`);

/**
 * Gives the holder's ids back: the final timestamp raises each stamp, the lease is removed. Ids
 * whose token is another's are left alone. ARGV: token, then pairs of id and timestamp.
 * Reply: how many ids were released.
 */
export const RELEASE_SCRIPT = script(`${PRELUDE}
local token, released = ARGV[1], 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local raw = redis.call('HGET', leases_key, id)
  if raw and cjson.decode(raw).t == token then
    local stamp = tonumber(ARGV[i + 1])
    if stamp > (tonumber(redis.call('HGET', stamps_key, id)) or 0) then
      redis.call('HSET', stamps_key, id, ms(stamp))
    end
    redis.call('HDEL', leases_key, id)
    released = released + 1
  end
end
return released
`);
