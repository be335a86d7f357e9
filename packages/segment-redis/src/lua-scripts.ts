// The Lua scripts of the Redis segment store. Each runs atomically in Redis and starts with the
// namespace's marker check: a namespace whose marker is gone, or whose Redis restarted or failed
// over since the marker was written, is refused before any range can be handed out twice.
import { luaScript, REDIS_TAKEOVER_LUA } from "@leaf/redis-support";

/**
 * Helpers of every script. Ids stay decimal strings in Lua (its numbers are doubles, exact only up
 * to 2^53): `canonical` accepts 0 .. 2^63 - 1 written without sign or leading zeros, `below`
 * compares two canonical strings, and every sum is made by Redis's own 64-bit HINCRBY, which
 * refuses to pass 2^63 - 1. `canonical_step` accepts 1 .. 2^31 - 1 in the same form (Lua's
 * tonumber alone would read "0x10" as 16 and " 7" as 7). A marker copy (`t:`/`d:`) that is not
 * canonical is refused (`bad_mark`), never skipped: skipping it would drop the check it is for.
 * Every write of the marker sets `written_ms`, Redis TIME then (see MARKER_CHECK). Error replies
 * are `LEAF_<KIND> <json>`.
 */
const HELPERS = `${REDIS_TAKEOVER_LUA}
if redis.replicate_commands then pcall(redis.replicate_commands) end
local marker_key = KEYS[1]
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local function ms(n) return string.format('%.0f', n) end
local function fail(kind, fields)
  return redis.error_reply('LEAF_' .. kind .. ' ' .. cjson.encode(fields))
end
local function canonical(s)
  if type(s) ~= 'string' or #s > 19 then return false end
  if s ~= '0' and not string.find(s, '^[1-9]%d*$') then return false end
  return #s < 19 or s <= '9223372036854775807'
end
local function canonical_step(s)
  if type(s) ~= 'string' or #s > 10 or not string.find(s, '^[1-9]%d*$') then return false end
  return tonumber(s) <= 2147483647
end
local function bad_mark(tag, field, value)
  return fail('BAD_MARK', {tag = tag, field = field, value = tostring(value)})
end
local function below(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local function stamp()
  local replication = redis.call('INFO', 'replication')
  local input = string.match(redis.call('INFO', 'stats'), 'total_net_repl_input_bytes:(%d+)')
  return 'written_ms', ms(now_ms),
    'repl_offset', string.match(replication, 'master_repl_offset:(%d+)') or '0',
    'backlog', string.match(replication, 'repl_backlog_active:(%d)') or '0',
    'repl_input', input or ''
end
`;

/**
 * The marker check every script but {@link CREATE_NAMESPACE_SCRIPT} and {@link LIFT_FENCE_SCRIPT}
 * opens with. KEYS[1] the marker; ARGV[1] the client's waitReplicas.
 *
 * The marker (a hash without expiry) holds the run id and replication id of the Redis process
 * that holds the namespace, the namespace's waitReplicas, and per tag the high-water max id
 * (`t:<tag>`) and the max id a deleted tag had (`d:<tag>`). It is written only by createNamespace,
 * so a missing marker means the namespace was never created or Redis lost it (a restart without
 * persistence, a flush, a failover to a replica without it, a hand deletion): refused
 * (LEAF_MISSING), since tags re-created from nothing would start below ids handed out.
 *
 * When the marker names another process (`restarted`: a restart, a restore, a failover to a
 * replica that had the marker) or this process promoted while it missed writes (`promoted`),
 * ranges acknowledged before may be missing here. That is accepted only when the marker names
 * another process (`restarted`; the marker's own process that was a replica since, `promoted` or
 * `resynced`, took its data from elsewhere and is always fenced) and this process was
 * promoted from a replica and the namespace's every write waited for waitReplicas (at least 1)
 * replicas: the replica promoted had them all, if waitReplicas counts every replica that may be
 * promoted. Otherwise the namespace is fenced (LEAF_FENCED): every call is refused until an
 * operator lifts the fence (LIFT_FENCE_SCRIPT). Both are recorded in the marker and logged by
 * Redis at warning level.
 *
 * "Promoted from a replica" is INFO's second_repl_offset, which Redis 7 also sets on a master
 * restarted from an RDB file with replication info: a master killed and restarted from an older
 * snapshot looks promoted. What tells them apart is time: a promoted replica was running when the
 * last write it holds was made (it received it), a restarted process started after every write it
 * holds. So every write of the marker records Redis TIME (`written_ms`), and a takeover is accepted
 * only when this process started (TIME - uptime_ms: the end of the second the process started in,
 * never earlier than the truth; see REDIS_TAKEOVER_LUA) at or before the marker's `written_ms`. A
 * marker without it (edited by hand) is fenced. This rests on the clocks: a restarted master's
 * clock not stepped back across its restart by more than the restart took (for a replica restarted
 * and then promoted, its clock not behind the old master's by more than that).
 *
 * A replica running since before the last write can still hold older data: when the master is
 * restarted from an older snapshot and the replica re-syncs from it in full before any script
 * runs, the replica takes the snapshot's data. So a takeover is also accepted only when the
 * replication id this process had before its promotion (`replid2`) is the one the marker recorded
 * at its last write: the replica followed that master's history. A restarted master takes a new
 * replication id, and a replica that re-syncs from it (in full or in part) takes that id too.
 * Two promotions in a row with no call in between are fenced for the same reason (the second
 * replica followed the first, not the marked master).
 */
const MARKER_CHECK = `${HELPERS}
local marker = redis.call('HMGET', marker_key, 'run_id', 'replid', 'wait_replicas', 'fence_reason',
  'fenced_at_ms', 'written_ms', 'repl_offset', 'backlog', 'repl_input')
if not marker[1] then return fail('MISSING', {}) end
if marker[3] ~= ARGV[1] then return fail('SETTINGS', {wait_replicas = marker[3] or ''}) end
if marker[4] then return fail('FENCED', {reason = marker[4], at = marker[5] or ''}) end
local takeover, run_id, replid, uptime_ms, promoted, replid2, role =
  leaf_redis_takeover(marker[1], marker[2], marker[7], marker[8], marker[9] ~= '' and marker[9])
if role ~= 'master' then
  return redis.error_reply('READONLY leaf segment-redis: this Redis is a replica (' .. role ..
    '), written to only if replica-read-only is off; ranges are taken on the master only')
end
if takeover then
  local written_ms = marker[6] and string.find(marker[6], '^%d+$') and tonumber(marker[6])
  local started_ms = now_ms - uptime_ms
  local running = written_ms and started_ms <= written_ms
  local followed = marker[2] ~= nil and marker[2] ~= '' and replid2 == marker[2]
  if takeover == 'restarted' and promoted and running and followed and
      (tonumber(marker[3]) or 0) >= 1 then
    redis.call('HSET', marker_key, 'run_id', run_id, 'replid', replid, 'accepted_reason', takeover,
      'accepted_at_ms', ms(now_ms), 'accepted_run_id', marker[1], stamp())
    redis.log(redis.LOG_WARNING, 'leaf segment-redis: marker ' .. marker_key .. ' ' .. takeover ..
      ': accepted, every write waited for ' .. marker[3] .. ' replicas')
  else
    redis.call('HSET', marker_key, 'run_id', run_id, 'replid', replid, 'fence_reason', takeover,
      'fenced_at_ms', ms(now_ms), 'fenced_run_id', marker[1], stamp())
    local why = ''
    if promoted and not running then
      why = ' (started at ' .. ms(started_ms) .. ' ms, after the last write of the marker it ' ..
        'holds, ' .. tostring(marker[6]) .. ': a restart, not a promotion)'
    elseif promoted and not followed then
      why = ' (promoted from replication id ' .. replid2 .. ', not the one the marker recorded, ' ..
        tostring(marker[2]) .. ': it re-synced from another history, such as a master restarted ' ..
        'from an older snapshot)'
    elseif takeover == 'resynced' then
      why = ' (the same process was a replica since the marker was written: it read from a ' ..
        'master, and a full re-sync replaces its data)'
    end
    redis.log(redis.LOG_WARNING, 'leaf segment-redis: marker ' .. marker_key .. ' ' .. takeover ..
      why .. ': ranges handed out before may be missing, every call refused until the fence is ' ..
      'lifted')
    return fail('FENCED', {reason = takeover, at = ms(now_ms)})
  end
elseif replid ~= marker[2] then
  redis.call('HSET', marker_key, 'replid', replid, stamp())
end
`;

/**
 * Reading the row of the tag in KEYS[2], ARGV[2] its name: LEAF_GONE when the key is missing while
 * the marker records the tag (deleted by hand, evicted), LEAF_UNKNOWN when neither has it,
 * LEAF_BAD_MARK when the marker's copy of its max id is not canonical.
 */
const READ_ROW = `
local tag_key, tag = KEYS[2], ARGV[2]
local high = redis.call('HGET', marker_key, 't:' .. tag)
if high and not canonical(high) then return bad_mark(tag, 't:' .. tag, high) end
local row = redis.call('HMGET', tag_key, 'max_id', 'step', 'version', 'description', 'updated_ms')
if not row[1] and not row[2] then
  if high then return fail('GONE', {tag = tag, high = high}) end
  return fail('UNKNOWN', {tag = tag})
end
`;

/**
 * Takes a range. KEYS: marker, tag. ARGV: waitReplicas, tag, step ('' for the stored one), floor
 * (the end of the last range this store instance returned, decimal).
 *
 * Refused, nothing changed: a stored step that is not 1 .. 2^31 - 1 in decimal (LEAF_BAD_STEP), a
 * max id that is not 0 .. 2^63 - 1 (LEAF_BAD_MAX) or a marker copy that is not (LEAF_BAD_MARK), a
 * max id below the marker's high-water max id (moved back by hand, LEAF_BEHIND) or below the floor
 * (LEAF_BELOW_FLOOR, with the run id: a host other than the floor's is a stale primary), a range
 * past 2^63 - 1 (LEAF_EXHAUSTED, HINCRBY's overflow check). Answers {new max id, stored step,
 * version, run id}; the version counts the tag's range writes, for give-backs.
 */
export const TAKE_SCRIPT = luaScript(`${MARKER_CHECK}${READ_ROW}
if not canonical_step(row[2]) then return fail('BAD_STEP', {tag = tag, step = tostring(row[2])}) end
local stored_step = tonumber(row[2])
local max_id = row[1]
if not canonical(max_id) then return fail('BAD_MAX', {tag = tag, max = tostring(max_id)}) end
if high and below(max_id, high) then
  return fail('BEHIND', {tag = tag, max = max_id, high = high})
end
if below(max_id, ARGV[4]) then
  return fail('BELOW_FLOOR', {tag = tag, max = max_id, run_id = run_id})
end
local step = tonumber(ARGV[3]) or stored_step
local moved = redis.pcall('HINCRBY', tag_key, 'max_id', step)
if type(moved) == 'table' and moved.err then
  if string.find(moved.err, 'overflow') then
    return fail('EXHAUSTED', {tag = tag, max = max_id, step = step})
  end
  return redis.error_reply(moved.err)
end
local new_max = redis.call('HGET', tag_key, 'max_id')
local version = redis.call('HINCRBY', tag_key, 'version', 1)
redis.call('HSET', tag_key, 'updated_ms', ms(now_ms))
redis.call('HSET', marker_key, 't:' .. tag, new_max, stamp())
return {new_max, ms(stored_step), ms(version), run_id}
`);

/**
 * Gives back `[from, end)`: the max id becomes `from` only while it is `end`, the marker's
 * high-water max id is `end` and the version is the one the giver's last range left. Every range
 * and give-back moves the version on, so a copy of this call run late (sent again after a
 * reconnect) finds another version once anything happened in between: it never lowers the max id
 * below a range taken after it. KEYS: marker, tag. ARGV: waitReplicas, tag, from, end, version.
 * Answers {'given', version} or {'moved', max id, version} (nothing changed).
 */
export const GIVE_BACK_SCRIPT = luaScript(`${MARKER_CHECK}${READ_ROW}
local version = row[3] or '0'
if row[1] ~= ARGV[4] or version ~= ARGV[5] or (high and high ~= ARGV[4]) then
  return {'moved', tostring(row[1]), version}
end
local next_version = redis.call('HINCRBY', tag_key, 'version', 1)
redis.call('HSET', tag_key, 'max_id', ARGV[3], 'updated_ms', ms(now_ms))
redis.call('HSET', marker_key, 't:' .. tag, ARGV[3], stamp())
return {'given', ms(next_version)}
`);

/**
 * Creates a tag. KEYS: marker, tag. ARGV: waitReplicas, tag, start id, step, description, '1' when
 * there is a description. Refused when the key exists (LEAF_EXISTS), or below the max id the tag
 * was deleted with or its key was lost with (LEAF_BELOW, `gone` '1' for a lost key). Answers
 * {max id, step, description or false, updated ms}.
 */
export const CREATE_TAG_SCRIPT = luaScript(`${MARKER_CHECK}
local tag_key, tag = KEYS[2], ARGV[2]
if redis.call('EXISTS', tag_key) == 1 then return fail('EXISTS', {tag = tag}) end
local high = redis.call('HGET', marker_key, 't:' .. tag)
local deleted = redis.call('HGET', marker_key, 'd:' .. tag)
if high and not canonical(high) then return bad_mark(tag, 't:' .. tag, high) end
if deleted and not canonical(deleted) then return bad_mark(tag, 'd:' .. tag, deleted) end
local floor = false
if deleted then floor = deleted end
if high and (not floor or below(floor, high)) then floor = high end
if floor and below(ARGV[3], floor) then
  return fail('BELOW', {tag = tag, min = floor, start = ARGV[3], gone = high and '1' or '0'})
end
redis.call('HSET', tag_key, 'max_id', ARGV[3], 'step', ARGV[4], 'version', '0', 'updated_ms',
  ms(now_ms))
local description = false
if ARGV[6] == '1' then
  description = ARGV[5]
  redis.call('HSET', tag_key, 'description', description)
end
redis.call('HSET', marker_key, 't:' .. tag, ARGV[3], stamp())
return {ARGV[3], ARGV[4], description, ms(now_ms)}
`);

/**
 * Changes a tag's stored step. KEYS: marker, tag. ARGV: waitReplicas, tag, step. Answers
 * {max id, step, description or false, updated ms}.
 */
export const UPDATE_STEP_SCRIPT = luaScript(`${MARKER_CHECK}${READ_ROW}
redis.call('HSET', tag_key, 'step', ARGV[3], 'updated_ms', ms(now_ms))
redis.call('HSET', marker_key, stamp())
return {row[1] or '', ARGV[3], row[4], ms(now_ms)}
`);

/**
 * Deletes a tag: its key goes, the marker keeps the highest of its max id, its high-water max id
 * and the max id it was deleted with before (`d:<tag>`), which createTag refuses to start below.
 * KEYS: marker, tag. ARGV: waitReplicas, tag. Answers {} when there was no such tag, else
 * {max id, step, description or false, updated ms, recorded max id}.
 */
export const DELETE_TAG_SCRIPT = luaScript(`${MARKER_CHECK}
local tag_key, tag = KEYS[2], ARGV[2]
local high = redis.call('HGET', marker_key, 't:' .. tag)
local deleted = redis.call('HGET', marker_key, 'd:' .. tag)
if high and not canonical(high) then return bad_mark(tag, 't:' .. tag, high) end
if deleted and not canonical(deleted) then return bad_mark(tag, 'd:' .. tag, deleted) end
local row = redis.call('HMGET', tag_key, 'max_id', 'step', 'description', 'updated_ms')
if not row[1] and not row[2] then
  if high then return fail('GONE', {tag = tag, high = high}) end
  return {}
end
if not canonical(row[1]) then return fail('BAD_MAX', {tag = tag, max = tostring(row[1])}) end
local recorded = row[1]
for _, other in ipairs({high or '0', deleted or '0'}) do
  if below(recorded, other) then recorded = other end
end
redis.call('HSET', marker_key, 'd:' .. tag, recorded, stamp())
redis.call('HDEL', marker_key, 't:' .. tag)
redis.call('DEL', tag_key)
return {row[1], row[2] or '', row[3], row[4], recorded}
`);

/**
 * Every tag the marker records with its row, ordered by name. KEYS: marker. ARGV: waitReplicas,
 * the tag keys' common prefix (the keys carry the namespace's hash tag, so they are in the
 * marker's Cluster slot). Refused when a recorded tag's key is gone (LEAF_GONE_TAGS). Answers
 * {{tag, max id, step, description or false, updated ms or false}, ...}.
 */
export const DESCRIBE_SCRIPT = luaScript(`${MARKER_CHECK}
local fields = redis.call('HGETALL', marker_key)
local names = {}
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 2) == 't:' then names[#names + 1] = string.sub(fields[i], 3) end
end
table.sort(names)
local out, gone = {}, {}
for _, tag in ipairs(names) do
  local row = redis.call('HMGET', ARGV[2] .. tag, 'max_id', 'step', 'description', 'updated_ms')
  if not row[1] and not row[2] then
    gone[#gone + 1] = tag
  else
    out[#out + 1] = {tag, row[1] or '', row[2] or '', row[3], row[4]}
  end
end
if #gone > 0 then return fail('GONE_TAGS', {tags = gone}) end
return out
`);

/**
 * Creates the namespace's marker when it is missing, recording each tag key found in the namespace
 * (only the marker was lost) with its max id, as a range would: the tags are listed again, and a
 * fence lifted later raises them. KEYS: marker. ARGV: waitReplicas, the tag keys' common prefix,
 * then the names of the tag keys the client found (SCAN; no tag key can be made while the marker is
 * missing, so none is added between). A found key whose max id is not canonical refuses the call
 * (LEAF_BAD_MAX) before anything is written. Answers {'created', tags recorded} or {'exists',
 * waitReplicas recorded}.
 */
export const CREATE_NAMESPACE_SCRIPT = luaScript(`${HELPERS}
if redis.call('EXISTS', marker_key) == 1 then
  return {'exists', redis.call('HGET', marker_key, 'wait_replicas') or ''}
end
local found = {}
for i = 3, #ARGV do
  local max_id = redis.call('HGET', ARGV[2] .. ARGV[i], 'max_id')
  if max_id then
    if not canonical(max_id) then return fail('BAD_MAX', {tag = ARGV[i], max = max_id}) end
    found[#found + 1] = ARGV[i]
    found[#found + 1] = max_id
  end
end
local _, run_id, replid = leaf_redis_takeover(false, false)
redis.call('HSET', marker_key, 'run_id', run_id, 'replid', replid, 'wait_replicas', ARGV[1],
  'created_at_ms', ms(now_ms), stamp())
for i = 1, #found, 2 do redis.call('HSET', marker_key, 't:' .. found[i], found[i + 1]) end
redis.log(redis.LOG_NOTICE, 'leaf segment-redis: namespace marker ' .. marker_key .. ' created, ' ..
  (#found / 2) .. ' tag keys found recorded')
return {'created', ms(#found / 2)}
`);

/**
 * Lifts the fence once an operator has made sure no id at or above each tag's max id was handed
 * out: every tag's max id (the higher of its key's and the marker's) and every deleted tag's
 * recorded max id is first raised by `raiseBy`, then the fence is cleared and the marker names
 * this process. All or nothing: a value that would pass 2^63 - 1 refuses the lift
 * (LEAF_LIFT_OVERFLOW) before anything changes. Tag keys the marker does not record (found by the
 * client's SCAN, passed after the prefix) are raised and recorded too; a marker copy that is not
 * canonical refuses the lift (LEAF_BAD_MARK). KEYS: marker. ARGV: waitReplicas, raiseBy (decimal),
 * 2^63 - 1 - raiseBy (decimal), the tag keys' common prefix, the names of the tag keys found.
 * Answers {'not-fenced'} or {'lifted', reason, tags raised}.
 */
export const LIFT_FENCE_SCRIPT = luaScript(`${HELPERS}
local marker = redis.call('HMGET', marker_key, 'run_id', 'replid', 'wait_replicas', 'fence_reason')
if not marker[1] then return fail('MISSING', {}) end
if marker[3] ~= ARGV[1] then return fail('SETTINGS', {wait_replicas = marker[3] or ''}) end
if not marker[4] then return {'not-fenced'} end
local raise_by, limit, prefix = ARGV[2], ARGV[3], ARGV[4]
local fields = redis.call('HGETALL', marker_key)
local plan = {}
local recorded = {}
local function add(kind, tag, value, key_max)
  if key_max and canonical(key_max) and (not value or below(value, key_max)) then value = key_max end
  if not value then return fail('BAD_MAX', {tag = tag, max = tostring(key_max)}) end
  if below(limit, value) then return fail('LIFT_OVERFLOW', {tag = tag, max = value}) end
  plan[#plan + 1] = {kind, tag, value, key_max}
end
for i = 1, #fields, 2 do
  local kind, tag = string.sub(fields[i], 1, 2), string.sub(fields[i], 3)
  if kind == 't:' or kind == 'd:' then
    if not canonical(fields[i + 1]) then return bad_mark(tag, fields[i], fields[i + 1]) end
    local key_max = false
    if kind == 't:' then
      recorded[tag] = true
      key_max = redis.call('HGET', prefix .. tag, 'max_id')
    end
    local refused = add(kind, tag, fields[i + 1], key_max)
    if refused then return refused end
  end
end
for i = 5, #ARGV do
  local tag = ARGV[i]
  if not recorded[tag] then
    recorded[tag] = true
    local key_max = redis.call('HGET', prefix .. tag, 'max_id')
    if key_max then
      local refused = add('t:', tag, false, key_max)
      if refused then return refused end
    end
  end
end
local raised = 0
for _, entry in ipairs(plan) do
  local kind, tag, value, key_max = entry[1], entry[2], entry[3], entry[4]
  redis.call('HSET', marker_key, kind .. tag, value)
  redis.call('HINCRBY', marker_key, kind .. tag, raise_by)
  if key_max then
    redis.call('HSET', prefix .. tag, 'max_id', value, 'updated_ms', ms(now_ms))
    redis.call('HINCRBY', prefix .. tag, 'max_id', raise_by)
    redis.call('HINCRBY', prefix .. tag, 'version', 1)
  end
  if kind == 't:' then raised = raised + 1 end
end
local _, run_id, replid = leaf_redis_takeover(marker[1], marker[2])
redis.call('HSET', marker_key, 'run_id', run_id, 'replid', replid, 'last_fence_reason', marker[4],
  'lifted_at_ms', ms(now_ms), 'lifted_raise_by', raise_by, stamp())
redis.call('HDEL', marker_key, 'fence_reason', 'fenced_at_ms', 'fenced_run_id')
redis.log(redis.LOG_WARNING, 'leaf segment-redis: fence of ' .. marker_key .. ' lifted, ' .. raised ..
  ' tags raised by ' .. raise_by)
return {'lifted', marker[4], ms(raised)}
`);

/** The marker's own fields (everything but the per-tag ones). KEYS: marker. */
export const INSPECT_SCRIPT = luaScript(`
local fields = redis.call('HGETALL', KEYS[1])
local out = {}
local tags, deleted = 0, 0
for i = 1, #fields, 2 do
  local kind = string.sub(fields[i], 1, 2)
  if kind == 't:' then tags = tags + 1
  elseif kind == 'd:' then deleted = deleted + 1
  else out[#out + 1] = fields[i]; out[#out + 1] = fields[i + 1] end
end
out[#out + 1] = 'tags'; out[#out + 1] = tostring(tags)
out[#out + 1] = 'deleted_tags'; out[#out + 1] = tostring(deleted)
return out
`);
