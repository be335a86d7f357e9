// The Redis worker-id registry: options, their checks and defaults, and acquire. The constructor
// does no I/O; the first acquire connects. Leases are in redis-lease.ts, the scripts in
// lua-scripts.ts.
import {
  type AcquireRequest,
  type Clock,
  configError,
  ErrorCodes,
  LeafError,
  systemClock,
  type WorkerIdRegistry,
} from "@leaf/core";
import {
  checkAcquireRequest,
  checkLeaseTimings,
  nonNegativeMs,
  positiveMs,
} from "@leaf/core/adapter";
import {
  checkEvictionMode,
  enforceRedisEviction,
  type RedisEvictionCheck,
  RedisLink,
} from "@leaf/redis-support";
import type { Cluster, ClusterOptions, Redis, RedisOptions } from "ioredis";
import { COMPONENT, redisFailure } from "./connection";
import { acquireRedisLease, type RedisLease } from "./redis-lease";

/** Why a lease still held when the registry closes is lost. */
const CLOSED_WHILE_HELD = "the registry was closed while the lease was held";

/** Options of {@link RedisRegistry}. Give exactly one of `url` and `client`. */
export interface RedisRegistryOptions {
  /**
   * `redis://[user:password@]host:port[/db]` (`rediss://` for TLS), or an array of Redis Cluster
   * node URLs. The registry makes the client and closes it on close().
   */
  url?: string | readonly string[];
  /**
   * An ioredis `Redis` (also one managed by Sentinel: `new Redis({ sentinels, name })`) or
   * `Cluster` the caller made and owns: close() leaves it open.
   */
  client?: Redis | Cluster;
  /** ioredis options for a client made from `url` (TLS, password, Sentinel settings, ...). */
  redisOptions?: RedisOptions;
  /** ioredis Cluster options when `url` is an array. */
  clusterOptions?: ClusterOptions;
  /**
   * Prefix of every key (default `"leaf:registry:"`); the keys of a service name are
   * `<prefix>{<name>}:leases`, `:stamps` and `:marker`, one hash tag so one Cluster slot.
   */
  keyPrefix?: string;
  /**
   * How long a lease lasts without renewal, ms, judged by Redis TIME (default 30,000). Another node
   * may take the id once it has passed; after Redis loses its data, no id is granted for this long.
   */
  leaseMs?: number;
  /**
   * The holder fences itself this long (ms) before its lease can end, counted on its own monotonic
   * clock from the send time of its last renewal Redis confirmed (default leaseMs / 5). It covers
   * the clock-rate difference between node and Redis over one lease and a late timer.
   */
  safetyMarginMs?: number;
  /** ms between renewals (default: the smaller of 3,000 and (leaseMs - safetyMarginMs) / 4). */
  renewIntervalMs?: number;
  /** Time limit of each round trip to Redis, ms (default: the renewal interval, 1,000 to 5,000). */
  commandTimeoutMs?: number;
  /**
   * How far (ms) the clock may be behind the stored timestamp at acquire and still be waited out;
   * further behind, acquire rejects with CLOCK_BEHIND_LEASE (default 5; at least safetyMarginMs is
   * waited out, since a recycled id starts up to that far in this clock's future).
   */
  toleranceMs?: number;
  /** Clock read for the start check and the horizons (default: the system clock). */
  clock?: Clock;
  /**
   * What acquire does when Redis's `maxmemory-policy` may evict the registry's keys (any
   * `allkeys-*` policy; the keys have no TTL, so `volatile-*` ones never do): "refuse" (default)
   * rejects with INVALID_CONFIG naming the setting, "warn" grants and warns once. An evicted lease
   * looks free, so another node can be granted an id still held. A policy that cannot be read
   * (CONFIG and INFO both refused) is warned about in either case.
   */
  evictionCheck?: "refuse" | "warn";
  /** Receives warnings (default: process.emitWarning with code LEAF_REGISTRY_REDIS_<TYPE>). */
  onWarning?: (warning: RedisRegistryWarning) => void;
}

/** A warning of the registry: something that makes ids risky without stopping them. */
export interface RedisRegistryWarning {
  /**
   * "eviction-policy": Redis may evict the keys; "eviction-policy-unknown": it could not be read.
   */
  type: "eviction-policy" | "eviction-policy-unknown";
  message: string;
  details?: Record<string, unknown>;
}

/** What is lost when Redis evicts the registry's keys, for the eviction check's messages. */
const EVICTION_CONSEQUENCE =
  "a worker-id lease or stamp (the keys have no TTL): a lease that is gone looks free, so another " +
  "node can be granted a worker id that is still held, and a stamp that is gone lets it start " +
  "before timestamps already used";

/** The timings of a {@link RedisRegistry} after defaults, ms. */
export interface RedisRegistryTimings {
  leaseMs: number;
  safetyMarginMs: number;
  renewIntervalMs: number;
  commandTimeoutMs: number;
}

/**
 * Hash tags end at the first "}", so a prefix holding braces would move keys off the name's slot.
 */
const KEY_PREFIX = /^[^{}]{0,200}$/;

/**
 * A {@link WorkerIdRegistry} on Redis: worker ids leased with a TTL by Lua scripts judged by Redis
 * TIME, a fencing token per holder, the highest timestamp of every id kept after release, and a
 * marker that holds back grants for one lease after Redis lost its data.
 */
export class RedisRegistry implements WorkerIdRegistry {
  readonly kind = "redis";
  readonly keyPrefix: string;
  readonly timings: RedisRegistryTimings;
  private readonly link: RedisLink;
  private readonly clock: Clock;
  private readonly toleranceMs: number;
  private readonly live = new Set<RedisLease>();
  private readonly evictionCheck: RedisEvictionCheck;
  private readonly onWarning: (warning: RedisRegistryWarning) => void;
  /** Warning types already given: each is given once per registry. */
  private readonly warned = new Set<RedisRegistryWarning["type"]>();
  private closed = false;

  constructor(options: RedisRegistryOptions) {
    if (!options || typeof options !== "object") {
      throw configError(
        COMPONENT,
        "options",
        options,
        "{ url } or { client }, with optional timings",
      );
    }
    const keyPrefix = options.keyPrefix ?? "leaf:registry:";
    if (typeof keyPrefix !== "string" || !KEY_PREFIX.test(keyPrefix)) {
      throw configError(
        COMPONENT,
        "keyPrefix",
        keyPrefix,
        "a string of at most 200 characters without { or }",
      );
    }
    this.keyPrefix = keyPrefix;
    const { leaseMs, safetyMarginMs, renewIntervalMs } = checkLeaseTimings(COMPONENT, options, {
      leaseMs: 30_000,
    });
    const commandTimeoutMs = positiveMs(
      COMPONENT,
      "commandTimeoutMs",
      options.commandTimeoutMs ?? Math.max(1000, Math.min(5000, renewIntervalMs)),
    );
    this.timings = { leaseMs, safetyMarginMs, renewIntervalMs, commandTimeoutMs };
    this.toleranceMs = nonNegativeMs(COMPONENT, "toleranceMs", options.toleranceMs ?? 5);
    this.clock = options.clock ?? systemClock;
    this.evictionCheck = checkEvictionMode(COMPONENT, options.evictionCheck);
    const onWarning = options.onWarning ?? defaultWarning;
    if (typeof onWarning !== "function") {
      throw configError(COMPONENT, "onWarning", onWarning, "a function");
    }
    this.onWarning = onWarning;
    this.link = new RedisLink({
      component: COMPONENT,
      url: options.url,
      client: options.client,
      redisOptions: options.redisOptions,
      clusterOptions: options.clusterOptions,
      timeoutMs: commandTimeoutMs,
    });
  }

  /** Where Redis is, without any password. */
  get redis(): string {
    return this.link.description;
  }

  /** The leases this registry holds and has not released or lost. */
  get leases(): readonly RedisLease[] {
    return [...this.live];
  }

  /**
   * Grants the lowest free worker id (and `backups` more) for `request.node`, or exactly
   * `request.workerId` when given. Rejects with WORKER_ID_IN_USE (the requested id is leased),
   * WORKER_IDS_EXHAUSTED, UNAVAILABLE (Redis does not answer; there is no local fallback: another
   * node may hold this node's former id), CLOCK_BEHIND_LEASE, CORRUPT_DATA or CLOSED. After Redis
   * lost its data it waits (at most one lease) before granting.
   */
  async acquire(request: AcquireRequest): Promise<RedisLease> {
    if (this.closed) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.CLOSED,
        message: "registry is closed: create a new RedisRegistry to acquire again",
      });
    }
    const checked = checkAcquireRequest(COMPONENT, request, {
      maxNameLength: 200,
      maxWorkerIdLimit: 2 ** 31 - 1,
      requestedWorkerId: true,
    });
    const unknownPolicy = await this.checkEviction();
    const lease = await acquireRedisLease(
      {
        link: this.link,
        keyPrefix: this.keyPrefix,
        clock: this.clock,
        toleranceMs: this.toleranceMs,
        ...this.timings,
        forget: (l) => this.live.delete(l),
      },
      checked,
    );
    if (this.closed) {
      lease.abandon(CLOSED_WHILE_HELD);
      throw lease.lost.reason;
    }
    this.live.add(lease);
    // Said only once Redis has answered the grant: an unreadable policy of a Redis that is down is
    // the UNAVAILABLE above, not a warning.
    if (unknownPolicy) this.warnOnce(unknownPolicy);
    return lease;
  }

  /**
   * Reads Redis's eviction policy before a grant: a policy that may evict the keys rejects with
   * INVALID_CONFIG (or warns, with evictionCheck "warn"); one that cannot be read is returned, to
   * be warned about once the grant shows Redis answers. The check is `@leaf/redis-support`'s.
   */
  private async checkEviction(): Promise<RedisRegistryWarning | undefined> {
    const warning = await enforceRedisEviction(this.link, {
      component: COMPONENT,
      keysExpire: false,
      consequence: EVICTION_CONSEQUENCE,
      mode: this.evictionCheck,
      failure: (error) => redisFailure(this.link, error, "reading maxmemory-policy"),
    });
    if (warning?.type === "eviction-policy") {
      this.warnOnce(warning);
      return undefined;
    }
    return warning;
  }

  private warnOnce(warning: RedisRegistryWarning): void {
    if (this.warned.has(warning.type)) return;
    this.warned.add(warning.type);
    this.onWarning(warning);
  }

  /**
   * Stops renewals and closes a client made from `url` (a passed-in client stays open). Leases
   * still held are not released but lost (`lost` aborts): without renewals nothing keeps another
   * node off their ids once the lease ends. Release them first for a clean hand-over. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const lease of [...this.live]) lease.abandon(CLOSED_WHILE_HELD);
    this.live.clear();
    await this.link.close();
  }
}

function defaultWarning(warning: RedisRegistryWarning): void {
  process.emitWarning(warning.message, {
    code: `LEAF_REGISTRY_REDIS_${warning.type.toUpperCase().replaceAll("-", "_")}`,
  });
}
