// A worker id leased from Redis: taken by one script judged by Redis TIME, renewed only while its
// fencing token is still there, fenced on the holder's own monotonic clock at lease - margin after
// the send time of the last renewal Redis confirmed, which is before Redis lets anyone else take
// it.
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import {
  type BackupWorker,
  type Clock,
  delay,
  ErrorCodes,
  LeafError,
  type NodeIdentity,
} from "@leaf/core";
import {
  type CheckedAcquireRequest,
  checkClockNotBehind,
  type FenceReason,
  type LeaseTimings,
  type RenewalConfirmed,
  RenewingLease,
  workerIdsExhaustedError,
} from "@leaf/core/adapter";
import type { RedisLink } from "@leaf/redis-support";
import { COMPONENT, runScript } from "./connection";
import { ACQUIRE_SCRIPT, RELEASE_SCRIPT, RENEW_SCRIPT } from "./lua-scripts";

/** The three keys of one service name; one hash tag, so one Cluster slot. */
export interface RegistryKeys {
  /** Hash: worker id -> the holder (token, lease end, horizon, ip, port) as JSON. */
  readonly leases: string;
  /** Hash: worker id -> highest timestamp (ms) reported or fenced; kept after release. */
  readonly stamps: string;
  /** Hash: run id of the Redis process, quarantine end and floor after a data loss. */
  readonly marker: string;
}

/** The keys of service `name` under `keyPrefix`: `<prefix>{<name>}:leases|stamps|marker`. */
export function registryKeys(keyPrefix: string, name: string): RegistryKeys {
  const base = `${keyPrefix}{${name}}`;
  return { leases: `${base}:leases`, stamps: `${base}:stamps`, marker: `${base}:marker` };
}

/** What a lease needs from its registry (with the checked lease timings). */
export interface LeaseSettings extends LeaseTimings {
  link: RedisLink;
  keyPrefix: string;
  clock: Clock;
  toleranceMs: number;
  /** Called when a lease ends (released or lost), so the registry stops tracking it. */
  forget(lease: RedisLease): void;
}

/**
 * Takes 1 + backups worker ids for `request.node`, all or none (or exactly the requested id, else
 * WORKER_ID_IN_USE); waits out a quarantine.
 */
export async function acquireRedisLease(
  settings: LeaseSettings,
  request: CheckedAcquireRequest,
): Promise<RedisLease> {
  const keys = registryKeys(settings.keyPrefix, request.node.name);
  const token = `${request.key}#${process.pid}#${randomBytes(8).toString("hex")}`;
  const need = 1 + request.backups;
  for (;;) {
    request.signal?.throwIfAborted();
    const sentAt = performance.now();
    const horizon = settings.clock.now() + settings.leaseMs;
    const reply = (await runScript(
      settings.link,
      ACQUIRE_SCRIPT,
      [keys.leases, keys.stamps, keys.marker],
      [
        settings.leaseMs,
        token,
        need,
        request.maxWorkerId,
        horizon,
        request.node.ip,
        request.node.port,
        request.workerId ?? "",
      ],
      `taking ${need === 1 ? "a worker id" : `${need} worker ids`} for ${request.key}`,
    )) as string[];
    if (reply[0] === "wait") {
      // Redis lost or may have lost the leases: holders of the old data fence within one lease.
      await delay(Number(reply[1]) + 1, request.signal);
      continue;
    }
    if (reply[0] === "in_use") {
      // ["in_use", id, ms left, ip, port]: the requested id is leased to another holder.
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.WORKER_ID_IN_USE,
        message:
          `worker id ${reply[1]} requested by ${request.key} is leased in Redis to ${reply[3]}:${reply[4]} ` +
          `for ${reply[2]} ms more unless renewed; stop that node (a pod with the same StatefulSet ` +
          "ordinal still running?) and start this one again once its lease ends",
        details: {
          workerId: Number(reply[1]),
          holder: `${reply[3]}:${reply[4]}`,
          leftMs: Number(reply[2]),
        },
      });
    }
    if (reply[0] === "exhausted") {
      // ["exhausted"] or ["exhausted", soonest id, ms left, ip, port]
      throw workerIdsExhaustedError(
        COMPONENT,
        request,
        settings.leaseMs,
        reply.length > 1
          ? { workerId: reply[1]!, ms: reply[2]!, ip: reply[3]!, port: reply[4]! }
          : undefined,
      );
    }
    const held: BackupWorker[] = [];
    for (let i = 3; i < reply.length; i += 2) {
      held.push({ workerId: Number(reply[i]), lastTimestamp: Number(reply[i + 1]) });
    }
    const lease = new RedisLease(
      settings,
      keys,
      request.node,
      token,
      held,
      sentAt,
      Number(reply[1]),
      // The horizon Redis stored: this clock + lease, capped at Redis TIME + lease.
      Number(reply[2]),
    );
    // An id recycled from a holder whose clock ran a little ahead, or granted right after a
    // quarantine, starts in this clock's future by up to the margin: wait it out, else refuse.
    const primary = held[0]!;
    try {
      const wait = checkClockNotBehind({
        component: COMPONENT,
        lastTimestamp: primary.lastTimestamp,
        now: settings.clock.now(),
        toleranceMs: Math.max(settings.toleranceMs, settings.safetyMarginMs),
        source: `${keys.stamps} (or the floor in ${keys.marker})`,
        workerId: primary.workerId,
      });
      if (wait > 0) await delay(wait + 1, request.signal);
    } catch (error) {
      await lease.release().catch(() => {});
      throw error;
    }
    if (lease.lost.aborted) throw lease.lost.reason;
    return lease;
  }
}

/** Worker ids leased from Redis by {@link RedisRegistry}. */
export class RedisLease extends RenewingLease {
  /** This holder's fencing token, stored with each of its ids. */
  readonly token: string;
  /** The Redis keys of this lease's service name. */
  readonly keys: RegistryKeys;
  /**
   * The floor (ms since the epoch, Redis TIME) this lease was granted under: above 0 after Redis
   * restarted without its data or failed over, when every id starts at or after it.
   */
  readonly floor: number;

  constructor(
    private readonly settings: LeaseSettings,
    keys: RegistryKeys,
    readonly node: NodeIdentity,
    token: string,
    held: BackupWorker[],
    sentAt: number,
    floor: number,
    /**
     * The horizon the grant stored with every id (the taker's clock + lease, at most Redis TIME +
     * lease).
     */
    horizon: number,
  ) {
    const { leaseMs, safetyMarginMs, renewIntervalMs, clock } = settings;
    super(
      { component: COMPONENT, ...held[0]!, backups: held.slice(1) },
      { leaseMs, safetyMarginMs, renewIntervalMs, sentAt, clock, horizon },
    );
    this.token = token;
    this.keys = keys;
    this.floor = floor;
  }

  /**
   * Frees the ids: the final timestamp (default: the later of the last report and the clock) raises
   * each stamp, the leases are removed. Rejects with UNAVAILABLE when Redis does not answer; the
   * ids then come back when the lease ends, and their stored horizon covers every id issued under
   * them.
   */
  protected async releaseOnce(): Promise<void> {
    try {
      await runScript(
        this.settings.link,
        RELEASE_SCRIPT,
        [this.keys.leases, this.keys.stamps, this.keys.marker],
        [this.token, ...this.heldIds().flatMap((id) => [id, this.highest(id)])],
        `releasing worker id ${this.workerId}`,
      );
    } finally {
      this.settings.forget(this);
    }
  }

  /**
   * Renews every held id in one script, only while each still carries this lease's token; resolves
   * with the horizon stored (each id's is at least it), which lifts the generator's limit. Redis
   * caps it at its own TIME + lease, so a holder whose clock ran ahead of Redis's stops at Redis's
   * time + lease, where the floor after a data loss puts the next holder (see RENEW_SCRIPT).
   */
  protected async renewOnce(): Promise<RenewalConfirmed> {
    const ids = this.heldIds();
    // The latest timestamp this holder may issue if this is its last confirmed renewal: it fences
    // at lease - margin, the margin absorbs a late fence timer. Reports count too, in case the
    // generator reads a clock ahead of this registry's.
    const horizon =
      Math.max(this.settings.clock.now(), ...ids.map((id) => this.highest(id))) +
      this.settings.leaseMs;
    const reply = (await runScript(
      this.settings.link,
      RENEW_SCRIPT,
      [this.keys.leases, this.keys.stamps, this.keys.marker],
      [this.settings.leaseMs, this.token, horizon, ...ids.flatMap((id) => [id, this.highest(id)])],
      `renewing worker id ${this.workerId}`,
    )) as string[];
    if (this.lost.aborted) throw this.lost.reason;
    if (reply[0] === "lost") {
      const id = Number(reply[1]);
      const why =
        reply[2] === "taken"
          ? `worker id ${id} is held by another node in Redis (${reply[3]}:${reply[4]})`
          : `worker id ${id} no longer carries this node's token in Redis (released by hand, or Redis lost its data)`;
      throw this.lose(why, { workerId: id, details: { token: this.token } });
    }
    return { horizon: Number(reply[1]) };
  }

  /** No confirmed renewal for lease - margin: stop before Redis may give the id to another node. */
  protected fenced(silentMs: number): FenceReason {
    return {
      why:
        `no renewal confirmed by Redis for ${silentMs} ms (lease ${this.settings.leaseMs} ms, safety ` +
        `margin ${this.settings.safetyMarginMs} ms): fenced before Redis may give the id to another node`,
    };
  }

  /** The lease is lost: no more renewals, and the registry stops tracking it. */
  protected override onLost(reason: LeafError): void {
    super.onLost(reason);
    this.settings.forget(this);
  }
}
