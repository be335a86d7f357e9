// Whether a Redis may evict an adapter's keys: its maxmemory-policy read at start (CONFIG GET, or
// INFO memory where CONFIG is renamed or disabled, as managed services often do) and judged for
// the adapter's keys. One place for registry-redis and segment-redis (refuse by default) and
// redis-sequence (warns).
import { configError, ErrorCodes, LeafError } from "@leaf/core";
import { bareMessage } from "@leaf/core/adapter";
import type { RedisLink } from "./connection";
import { withTimeLimit } from "./redis-link";

/** The two reads the check needs from one Redis server; an ioredis `Redis` has both. */
export interface RedisSettingsReader {
  config(subcommand: "GET", parameter: string): Promise<unknown>;
  info(section: string): Promise<string>;
}

/** One Redis server's eviction settings as read. */
export interface RedisEvictionSettings {
  /** `maxmemory-policy` (e.g. "noeviction", "allkeys-lru"); undefined when it could not be read. */
  policy: string | undefined;
  /** `maxmemory` in bytes (0: no limit); undefined when it could not be read. */
  maxmemory: number | undefined;
  /** Where the values came from. */
  source: "CONFIG GET" | "INFO memory" | undefined;
  /** Why neither CONFIG GET nor INFO memory gave the policy (both errors), when they did not. */
  unreadable?: string;
}

/**
 * Reads `maxmemory-policy` and `maxmemory` of one server: CONFIG GET, else INFO memory (which has
 * both since Redis 4 and is left enabled where CONFIG is renamed). Never rejects: a server that
 * answers neither within `timeoutMs` gives `policy: undefined` and the reasons in `unreadable`.
 */
export async function readRedisEviction(
  server: RedisSettingsReader,
  timeoutMs: number,
): Promise<RedisEvictionSettings> {
  let configError: string;
  try {
    const reply = await withTimeLimit(
      server.config("GET", "maxmemory*"),
      timeoutMs,
      "reading maxmemory-policy",
    );
    const pairs = Array.isArray(reply) ? reply.map(String) : [];
    const value = (name: string) => {
      const at = pairs.findIndex((item, i) => i % 2 === 0 && item === name);
      return at < 0 ? undefined : pairs[at + 1];
    };
    const policy = value("maxmemory-policy");
    if (policy === undefined) throw new Error(`CONFIG GET answered ${JSON.stringify(reply)}`);
    return { policy, maxmemory: bytes(value("maxmemory")), source: "CONFIG GET" };
  } catch (error) {
    configError = reasonOf(error);
  }
  try {
    const info = await withTimeLimit(server.info("memory"), timeoutMs, "reading INFO memory");
    const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
    if (policy === undefined) throw new Error("INFO memory has no maxmemory_policy");
    const maxmemory = bytes(/^maxmemory:(\d+)/m.exec(info)?.[1]);
    return { policy, maxmemory, source: "INFO memory" };
  } catch (error) {
    return {
      policy: undefined,
      maxmemory: undefined,
      source: undefined,
      unreadable: `CONFIG GET: ${configError}; INFO memory: ${reasonOf(error)}`,
    };
  }
}

/**
 * Whether `policy` may evict a key: every `allkeys-*` policy may evict any key, a `volatile-*`
 * policy only keys with a TTL (`keysExpire`); `noeviction` none. An unknown policy counts as
 * evicting.
 */
export function policyMayEvict(policy: string, keysExpire: boolean): boolean {
  if (policy === "noeviction") return false;
  if (policy.startsWith("volatile-")) return keysExpire;
  return true;
}

/** What an adapter's keys are and what their eviction does, for the check's messages. */
export interface RedisEvictionContext {
  /** Component named in messages, e.g. "registry-redis". */
  component: string;
  /** Where Redis is, without a password. */
  where: string;
  /** True when keys that matter have a TTL, so that `volatile-*` policies may evict them too. */
  keysExpire: boolean;
  /**
   * What is evicted and what follows, e.g. "a worker-id lease: another node can be granted ...".
   */
  consequence: string;
}

/** What the check found: a policy that may evict the keys, or a policy it could not read. */
export interface RedisEvictionFinding {
  kind: "evicting" | "unreadable";
  /** The whole message, `[leaf] [component] ...`, naming the setting to change. */
  message: string;
  /** Each server's settings as read, in the order given. */
  servers: RedisEvictionSettings[];
}

/**
 * Judges the settings of every server that may hold the keys (each master of a Cluster):
 * "evicting" when any server's policy may evict them, else "unreadable" when any server's policy
 * could not be read, else undefined (every server keeps the keys until they are deleted).
 */
export function judgeRedisEviction(
  servers: RedisEvictionSettings[],
  context: RedisEvictionContext,
): RedisEvictionFinding | undefined {
  const prefix = `[leaf] [${context.component}] Redis at ${context.where}`;
  const evicting = servers.filter(
    (s) => s.policy !== undefined && policyMayEvict(s.policy, context.keysExpire),
  );
  if (evicting.length > 0) {
    const seen = evicting
      .map(
        (s) =>
          `${s.policy} (maxmemory ${s.maxmemory ?? "unknown"}${s.maxmemory === 0 ? ": no limit yet" : ""}, read by ${s.source})`,
      )
      .join(", ");
    return {
      kind: "evicting",
      message:
        `${prefix} has maxmemory-policy ${seen}: once memory is full it may evict ${context.consequence}. ` +
        "Set maxmemory-policy noeviction on every master (CONFIG SET maxmemory-policy noeviction, and in " +
        "redis.conf or the service's parameter group)",
      servers,
    };
  }
  const unread = servers.filter((s) => s.policy === undefined);
  if (unread.length > 0) {
    return {
      kind: "unreadable",
      message:
        `${prefix}: could not read maxmemory-policy (${unread.map((s) => s.unreadable).join(" | ")}), ` +
        `so whether it may evict ${context.consequence} is not known. Make sure maxmemory-policy is ` +
        "noeviction, or allow CONFIG GET or INFO for this client",
      servers,
    };
  }
  return undefined;
}

function bytes(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d+$/.test(text)) return undefined;
  return Number(text);
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** What an adapter does when Redis may evict its keys: refuse to run (default) or warn. */
export type RedisEvictionCheck = "refuse" | "warn";

/** Reads an adapter's `evictionCheck` option: "refuse" (default) or "warn"; INVALID_CONFIG else. */
export function checkEvictionMode(component: string, value: unknown): RedisEvictionCheck {
  const mode = value ?? "refuse";
  if (mode !== "refuse" && mode !== "warn") {
    throw configError(component, "evictionCheck", mode, '"refuse" or "warn"');
  }
  return mode;
}

/** A warning {@link enforceRedisEviction} leaves to the adapter to give (and when). */
export interface RedisEvictionWarning {
  /**
   * "eviction-policy": Redis may evict the keys; "eviction-policy-unknown": it could not be read.
   */
  type: "eviction-policy" | "eviction-policy-unknown";
  message: string;
  details: Record<string, unknown>;
}

/**
 * The eviction check of an adapter whose keys must not be evicted (no TTL, so `volatile-*` never
 * evicts them): reads the settings of every master, judges them for the adapter's keys and, with
 * `mode` "refuse", rejects with INVALID_CONFIG (`details.key` "maxmemory-policy") naming the policy
 * and the setting to change. Otherwise answers the warning to give: "eviction-policy" (mode
 * "warn") or "eviction-policy-unknown" (a policy that could not be read), or undefined when every
 * master keeps the keys. A link that cannot reach Redis rejects with `failure(cause)`.
 */
export async function enforceRedisEviction(
  link: RedisLink,
  context: Omit<RedisEvictionContext, "where"> & {
    mode: RedisEvictionCheck;
    failure: (cause: unknown) => Error;
  },
): Promise<RedisEvictionWarning | undefined> {
  let servers: RedisEvictionSettings[];
  try {
    servers = await link.evictionSettings();
  } catch (error) {
    throw context.failure(error);
  }
  const finding = judgeRedisEviction(servers, { ...context, where: link.description });
  if (!finding) return undefined;
  const details = { servers: finding.servers, evictionCheck: context.mode };
  if (finding.kind === "unreadable") {
    return { type: "eviction-policy-unknown", message: finding.message, details };
  }
  if (context.mode === "warn") {
    return { type: "eviction-policy", message: finding.message, details };
  }
  throw new LeafError({
    component: context.component,
    code: ErrorCodes.INVALID_CONFIG,
    message: `${bareMessage(finding.message)}; or, to run with it anyway, evictionCheck: "warn"`,
    details: { key: "maxmemory-policy", ...details },
  });
}
