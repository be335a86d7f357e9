// The parts of a Redis link, without a client library: reading and redacting redis:// URLs (one
// server, or the nodes of a Redis Cluster), running a Lua script by its SHA with the source sent
// once when Redis does not know it (after a restart or a failover), and a time limit on a round
// trip. RedisLink (connection.ts) builds its ioredis client from the plan this returns.
import { createHash } from "node:crypto";
import { configError } from "@leaf/core";

/** A script and its SHA-1, run by EVALSHA with a fallback to EVAL. */
export interface LuaScript {
  readonly source: string;
  readonly sha: string;
}

/** A Lua script with its SHA-1 computed once. */
export function luaScript(source: string): LuaScript {
  return Object.freeze({ source, sha: createHash("sha1").update(source).digest("hex") });
}

/**
 * A Lua fragment for scripts that keep a marker of the Redis process that holds their data: it
 * defines `leaf_redis_takeover(marked_run_id, marked_replid)`, which tells whether this Redis may
 * have lost writes since the marker was written, and returns `reason, run_id, replid, uptime_ms,
 * promoted, replid2` (`promoted`: this process was promoted from a replica, see below; a
 * `'restarted'` process that is promoted is a failover to a replica that had the marker; `replid2`:
 * the replication id this process had before its promotion, see below), then `role` (`master` or
 * `slave`: a script on a writable replica writes only there), `offset` (`master_repl_offset`),
 * `backlog` (`'1'` while the process keeps a replication backlog) and `input`
 * (`total_net_repl_input_bytes`, nil before Redis 7):
 *
 * - `'restarted'`: the marker names another process (a restart, a restore from an older snapshot,
 *   or a failover to a replica that had the marker);
 * - `'promoted'`: no marker, and this process was promoted from a replica (a failover that may have
 *   missed the last writes); or the marker names this process with another replication id while
 *   it was promoted (a failover away from it and back: it missed the writes made on the other
 *   master while it was a replica);
 * - `'missing'`: no marker otherwise (new data, or a restart that lost everything: `uptime_ms` says
 *   how long ago);
 * - `'resynced'`, only for a caller that passes what it recorded at its last write: the marker
 *   names this process, but the process was a replica since. On Redis 7 and later, INFO's
 *   `total_net_repl_input_bytes` (bytes read from a master over the process's life; a master reads
 *   none) is above the recorded one (`marked_input`): it read from a master since, and a full
 *   re-sync replaces its data. The marker may itself be an older copy that came with that data:
 *   its count is then lower still, so this holds, unless `CONFIG RESETSTAT` set the count back
 *   (a count below the recorded one is a reset: nothing is told from it). So also (and on Redis 6,
 *   which has no such count): its replication id changed without a promotion, and its offset went
 *   back or it kept a backlog at the last write (`marked_offset`, `marked_backlog`). A master
 *   changes its replication id by itself only when it creates a backlog for a first replica (not
 *   `resynced`) or frees it after `repl-backlog-ttl` with none (`resynced`: a false alarm, the
 *   price of telling the rest);
 * - `nil`: nothing lost that the marker can see.
 *
 * `uptime_ms` is never longer than the truth: INFO's `uptime_in_seconds` is the current second
 * minus the start's second (both whole seconds), so the start is only known to lie in that
 * second; `uptime_ms` is counted from its end (Redis TIME now minus the end of the start's second,
 * at least 0). A caller that takes `TIME - uptime_ms` as the start gets a time at or after the
 * true start: a quarantine counted from it ends no earlier than one counted from the truth, and a
 * check that the process ran before some write errs toward "it did not".
 *
 * Promoted means INFO's `second_repl_offset` is set: a promotion (REPLICAOF NO ONE, Sentinel,
 * FAILOVER, Cluster failover) moves the replication id to `master_replid2` at that offset and takes
 * a new one. A master's other replication id changes (its backlog created for a first replica, or
 * freed after `repl-backlog-ttl` with none) clear the offset and are no failover. A replica that
 * followed the marker's master without a break has that master's replication id, so once promoted
 * its `replid2` is the marker's `replid`; a replica that re-synced from another history (a master
 * restarted from an older snapshot takes a new replication id, and a full re-sync takes it over,
 * with the snapshot's data) has another. Write both back
 * to the marker (`run_id`, `replid`) after each call; a marker naming this process without a
 * replication id on a promoted Redis (none is written so) counts as promoted. Deleted keys and a
 * flushed database on the same running process are not seen.
 */
export const REDIS_TAKEOVER_LUA = `
local function leaf_redis_takeover(marked_run_id, marked_replid, marked_offset, marked_backlog,
    marked_input)
  local server = redis.call('INFO', 'server')
  local run_id = string.match(server, 'run_id:(%w+)') or 'unknown'
  local uptime_s = tonumber(string.match(server, 'uptime_in_seconds:(%d+)')) or 0
  local clock = redis.call('TIME')
  local uptime_ms = math.max(0, (uptime_s - 1) * 1000 + math.floor(tonumber(clock[2]) / 1000))
  local replication = redis.call('INFO', 'replication')
  local replid = string.match(replication, 'master_replid:(%w+)') or ''
  local replid2 = string.match(replication, 'master_replid2:(%w+)') or ''
  local second_offset = string.match(replication, 'second_repl_offset:(%-?%d+)')
  local promoted = second_offset ~= nil and second_offset ~= '-1'
  local role = string.match(replication, 'role:(%a+)') or 'master'
  local offset = string.match(replication, 'master_repl_offset:(%d+)') or '0'
  local backlog = string.match(replication, 'repl_backlog_active:(%d)') or '0'
  local input = string.match(redis.call('INFO', 'stats'), 'total_net_repl_input_bytes:(%d+)')
  local reason = nil
  if marked_run_id ~= run_id then
    if marked_run_id then
      reason = 'restarted'
    elseif promoted then
      reason = 'promoted'
    else
      reason = 'missing'
    end
  elseif input and marked_input and tonumber(input) > (tonumber(marked_input) or 0) then
    reason = 'resynced'
  elseif replid ~= '' and replid ~= marked_replid then
    if promoted then
      reason = 'promoted'
    elseif marked_offset and
        (tonumber(offset) < (tonumber(marked_offset) or 0) or marked_backlog == '1') then
      reason = 'resynced'
    end
  end
  return reason, run_id, replid, uptime_ms, promoted, replid2, role, offset, backlog, input
end
`;

/** The two commands a script runner needs; ioredis `Redis` and `Cluster` both have them. */
export interface RedisScriptClient {
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  eval(source: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
}

/**
 * True for an object with `evalsha` and `eval` (an ioredis client, from any copy of the library).
 */
export function isRedisScriptClient(value: unknown): value is RedisScriptClient {
  const candidate = value as Partial<RedisScriptClient> | null;
  return (
    typeof candidate === "object" &&
    candidate !== null &&
    typeof candidate.evalsha === "function" &&
    typeof candidate.eval === "function"
  );
}

/** Runs `script` by SHA; when Redis answers NOSCRIPT (it restarted, or failed over), by source. */
export async function runRedisScript(
  client: RedisScriptClient,
  script: LuaScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (error instanceof Error && error.message.startsWith("NOSCRIPT")) {
      return await client.eval(script.source, keys.length, ...keys, ...args);
    }
    throw error;
  }
}

/**
 * True when Redis answered a write with a refusal rather than failing to answer: NOREPLICAS (a
 * master with fewer good replicas than `min-replicas-to-write`), READONLY (a replica), MASTERDOWN
 * (a replica whose master is down) or MISCONF (a failed save). Nothing was changed; the caller may
 * retry, elsewhere or later. `reason` is the error's message: Redis 7 starts it with the code, also
 * from a script; Redis 6 wraps a script's in "ERR Error running script (…): … -CODE …".
 */
export function isRedisWriteRefusal(reason: string): boolean {
  return /(?:^|^ERR Error running script .*: -)(NOREPLICAS|READONLY|MASTERDOWN|MISCONF)\b/.test(
    reason,
  );
}

/**
 * True when Redis refused the client's credentials: WRONGPASS (a wrong user or password, Redis 6
 * and later), NOAUTH (no password given to a Redis that requires one), or "ERR invalid password"
 * (a password given to a Redis 5 or older that has another, or none).
 */
export function isRedisAuthRefusal(reason: string): boolean {
  return /^(WRONGPASS|NOAUTH)\b|^ERR (invalid password|AUTH <password> called without any password)/.test(
    reason,
  );
}

/**
 * How a failed Redis round trip reads in a message, after "Redis at HOST": "refused the write (…)"
 * for a refusal, "refused the credentials (…)" when the command or the client's last connection
 * error says the password (or user) was refused, else "did not answer (…)", with the client's last
 * connection error when it says more than `reason`.
 */
export function redisFailurePhrase(reason: string, lastConnectionError?: string): string {
  if (isRedisWriteRefusal(reason)) {
    return `refused the write (${reason}); it is not a master that may accept writes now`;
  }
  const auth = [reason, lastConnectionError ?? ""].find(isRedisAuthRefusal);
  if (auth !== undefined) {
    return `refused the credentials (${auth}); check the user and password in the URL`;
  }
  const last =
    lastConnectionError && lastConnectionError !== reason
      ? `; last connection error: ${lastConnectionError}`
      : "";
  return `did not answer (${reason}${last}); check that it runs and is reachable`;
}

/** What is expected of a Redis URL, for messages. */
export const REDIS_URL_EXPECTED =
  'a Redis URL such as "redis://127.0.0.1:6379" or "rediss://user:password@host:6380/0"';

/**
 * Parses a redis:// or rediss:// URL; throws INVALID_CONFIG naming `key`, with the password hidden.
 */
export function parseRedisUrl(value: unknown, where: { component: string; key: string }): URL {
  let url: URL | undefined;
  if (typeof value === "string") {
    try {
      url = new URL(value);
    } catch {
      url = undefined;
    }
  }
  if (!url || (url.protocol !== "redis:" && url.protocol !== "rediss:") || !url.hostname) {
    const shown = typeof value === "string" ? value.replace(/\/\/[^@/]*@/, "//***@") : value;
    throw configError(where.component, where.key, shown, REDIS_URL_EXPECTED);
  }
  return url;
}

/** The URL for logs and messages: user and password replaced by `***`. */
export function describeRedisUrl(url: URL): string {
  const auth = url.username || url.password ? "***@" : "";
  return `${url.protocol}//${auth}${url.host}${url.pathname === "/" ? "" : url.pathname}`;
}

/** How to reach Redis, read from the `url` option: one server, or the nodes of a Redis Cluster. */
export type RedisPlan =
  | { kind: "single"; url: string; description: string }
  | {
      kind: "cluster";
      nodes: { host: string; port: number }[];
      /** Credentials and TLS of the first URL, for every node. */
      auth: { username?: string; password?: string; tls?: Record<string, never> };
      description: string;
    };

/**
 * Reads a `url` option: a string is one server, an array the seed nodes of a Redis Cluster.
 * Throws INVALID_CONFIG naming `url` (or `url[i]`) for anything else.
 */
export function planRedis(url: string | readonly string[], component: string): RedisPlan {
  if (typeof url === "string") {
    return {
      kind: "single",
      url,
      description: describeRedisUrl(parseRedisUrl(url, { component, key: "url" })),
    };
  }
  if (!Array.isArray(url) || url.length === 0) {
    throw configError(component, "url", url, "at least one Redis Cluster node URL");
  }
  const urls = url.map((u, i) => parseRedisUrl(u, { component, key: `url[${i}]` }));
  const first = urls[0]!;
  return {
    kind: "cluster",
    nodes: urls.map((u) => ({
      host: u.hostname.replace(/^\[|\]$/g, ""),
      port: Number(u.port || 6379),
    })),
    auth: {
      ...(first.username ? { username: decodeURIComponent(first.username) } : {}),
      ...(first.password ? { password: decodeURIComponent(first.password) } : {}),
      ...(first.protocol === "rediss:" ? { tls: {} } : {}),
    },
    description: `cluster ${urls.map(describeRedisUrl).join(",")}`,
  };
}

/** How often a Redis Cluster client made from URLs re-reads the slot map, in ms. */
export const REDIS_CLUSTER_SLOTS_REFRESH_MS = 2000;

/** The options {@link redisClusterDefaults} returns (a subset of ioredis's ClusterOptions). */
export interface RedisClusterDefaults {
  /** Connect on first use (`new X(options)` makes no I/O). */
  lazyConnect: true;
  /** Redirections (MOVED, ASK) followed for one command while slots move. */
  maxRedirections: number;
  /** Re-read the slot map this often (ms): {@link REDIS_CLUSTER_SLOTS_REFRESH_MS}. */
  slotsRefreshInterval: number;
}

/**
 * The ioredis Cluster options every adapter's Cluster client made from node URLs starts from; the
 * caller's `clusterOptions` are spread over them. The slot map is re-read every
 * {@link REDIS_CLUSTER_SLOTS_REFRESH_MS} ms because ioredis (5.x) re-reads it otherwise only on a
 * MOVED reply, CLUSTERDOWN or a closed connection: a master whose host went silent (power lost, a
 * partition: no reset reaches the client) gives none of them, and the client would send that
 * master's slots to it for as long as the connection stays open (minutes of TCP retransmission)
 * after the cluster promoted its replica. Each refresh asks one node CLUSTER SLOTS on a short-lived
 * connection of its own.
 */
export function redisClusterDefaults(): RedisClusterDefaults {
  return {
    lazyConnect: true,
    maxRedirections: 16,
    slotsRefreshInterval: REDIS_CLUSTER_SLOTS_REFRESH_MS,
  };
}

/** A round trip that took longer than its limit. */
export class TimeLimitError extends Error {
  constructor(what: string, ms: number) {
    super(`no answer after ${ms} ms ${what}`);
    this.name = "TimeLimitError";
  }
}

/** Rejects with a {@link TimeLimitError} naming `what` when `promise` takes longer than `ms`. */
export function withTimeLimit<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TimeLimitError(what, ms)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
