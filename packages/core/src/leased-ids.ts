// Worker ids leased from a table with one row per id of a service, as the SQL registries keep them
// (MySQL's lease mode, PostgreSQL): taking ids (a requested one, released or expired ones,
// never-used ones; all or none), the start after the stored timestamp, and holding them (renewing
// every row with its horizon, releasing, fencing) are the same whatever the statements. The adapter
// writes one statement per step: a LeasedIdTable for one acquire, LeasedIdRows for one lease.
import type { CheckedAcquireRequest } from "./acquire-request";
import { delay } from "./backoff";
import type { Clock } from "./clock";
import { bareMessage, ErrorCodes, LeafError } from "./errors";
import { checkClockNotBehind } from "./lease-cache";
import type { BackupWorker } from "./registry";
import {
  type FenceReason,
  type LeaseTimings,
  type RenewalConfirmed,
  RenewingLease,
} from "./renewing-lease";

/**
 * The statements of one acquire on a table of leased worker ids (one row per id of the service;
 * a lease ends at a time judged by the store's clock). Each resolves once the store answered, and
 * rejects with a LeafError (UNAVAILABLE when the store cannot be reached).
 */
export interface LeasedIdTable {
  /**
   * Takes `workerId` for this acquire when its row is released or its lease ended by the store's
   * clock, in one guarded statement: holder, lease end (the store's now + the lease), and
   * `horizon` (ms since the Unix epoch, the holder's clock), the previous holder's horizon folded
   * into the last timestamp first. True when taken.
   */
  takeFree(workerId: number, horizon: number): Promise<boolean>;
  /**
   * Inserts a row for `workerId`, never used before, held by this acquire with `horizon` and last
   * timestamp 0. False when another acquire inserted it first (the key decided).
   */
  takeNew(workerId: number, horizon: number): Promise<boolean>;
  /**
   * Up to `limit` ids in 0..maxWorkerId whose rows are released or whose lease ended, in the order
   * to try them: this node's former ids first, then released ones (no horizon to wait out), lowest
   * first.
   */
  freeIds(limit: number): Promise<number[]>;
  /** Every id in 0..maxWorkerId that has a row. */
  usedIds(): Promise<number[]>;
  /** The last timestamp stored for each id this acquire took. */
  takenTimestamps(): Promise<ReadonlyMap<number, number>>;
  /**
   * Frees what this acquire took, after it failed: rows it inserted (`inserted`) removed, the
   * others released with their timestamps as they were (no id was issued under them).
   */
  giveBack(inserted: readonly number[]): Promise<void>;
  /** WORKER_ID_IN_USE for the requested `workerId`, leased by another holder (named). */
  inUseError(workerId: number): Promise<LeafError>;
  /** WORKER_IDS_EXHAUSTED naming the lease that ends soonest. */
  exhaustedError(): Promise<LeafError>;
  /**
   * Optional: runs first, before anything is taken (check that the store takes writes, take a
   * fencing token for the grant). Its errors count as the acquire's.
   */
  prepare?(): Promise<void>;
  /**
   * Optional: ids never to take (another mode's in the same database), read before taking; it
   * throws instead when the requested id is one.
   */
  reserved?(): Promise<ReadonlySet<number>>;
  /**
   * Optional: checks the taken ids once their rows are written (a racing start); throws to refuse.
   */
  checkTaken?(taken: readonly number[]): Promise<void>;
}

/** What an acquire took, for the lease that holds it. */
export interface LeasedIdsGrant {
  /** The primary id, then the backups, each with its stored last timestamp. */
  held: BackupWorker[];
  /** `performance.now()` when the first take that succeeded was sent. */
  sentAt: number;
  /** The lowest horizon written for a taken id: the lease's confirmed horizon. */
  horizon: number;
}

/** How {@link grantLeasedIds} takes ids. */
export interface GrantLeasedIdsOptions {
  component: string;
  leaseMs: number;
  safetyMarginMs: number;
  /** How far (ms) the clock may be behind the stored timestamp and still be waited out. */
  toleranceMs: number;
  clock: Clock;
  /** Where the timestamps are kept, for CLOCK_BEHIND_LEASE: "leaf_worker_lease.last_timestamp". */
  source: string;
  /**
   * Whether an error says the store could not be reached: the acquire then rejects UNAVAILABLE,
   * saying there is no local fallback.
   */
  isUnreachable(error: unknown): boolean;
}

/** Rounds of "look for free ids, try to take them" before concluding that none is left. */
const MAX_ROUNDS = 10;

/**
 * Takes 1 + backups worker ids for `request.node`, all or none; or exactly the requested id, else
 * WORKER_ID_IN_USE. Then makes the lease (`makeLease`, renewing from then on) and, when the
 * primary id was recycled from a holder whose clock ran a little ahead, waits its stored timestamp
 * out (up to `max(toleranceMs, safetyMarginMs)`; further ahead: CLOCK_BEHIND_LEASE). Whatever
 * fails after a take gives the taken ids back.
 */
export async function grantLeasedIds<L extends RenewingLease>(
  table: LeasedIdTable,
  request: CheckedAcquireRequest,
  options: GrantLeasedIdsOptions,
  makeLease: (grant: LeasedIdsGrant) => L,
): Promise<L> {
  const need = 1 + request.backups;
  const taken: number[] = [];
  /** Ids this acquire inserted (never used before): removed again when it is refused. */
  const inserted: number[] = [];
  let firstSentAt: number | undefined;
  let storedHorizon = Number.POSITIVE_INFINITY;

  /**
   * The holder's own clock + lease: it fences at lease - margin without a renewal, so it issues
   * nothing later than that even when its fence timer fires late by up to the margin.
   */
  const horizon = () => options.clock.now() + options.leaseMs;

  const take = async (workerId: number, fresh: boolean): Promise<void> => {
    const sentAt = performance.now();
    const written = horizon();
    const won = fresh
      ? await table.takeNew(workerId, written)
      : await table.takeFree(workerId, written);
    if (!won) return;
    taken.push(workerId);
    if (fresh) inserted.push(workerId);
    firstSentAt ??= sentAt;
    storedHorizon = Math.min(storedHorizon, written);
  };

  try {
    await table.prepare?.();
    const reserved = (await table.reserved?.()) ?? new Set<number>();
    if (request.workerId !== undefined) {
      // A requested id (a StatefulSet ordinal): that row only, released, expired or never used.
      await take(request.workerId, false);
      if (taken.length === 0) await take(request.workerId, true);
      if (taken.length === 0) throw await table.inUseError(request.workerId);
    }
    for (let round = 0; round < MAX_ROUNDS && taken.length < need; round++) {
      request.signal?.throwIfAborted();
      const free = await table.freeIds(need * 4 + 8);
      for (const id of free) {
        if (taken.length >= need) break;
        if (!taken.includes(id) && !reserved.has(id)) await take(id, false);
      }
      if (taken.length >= need) break;
      const used = new Set([...(await table.usedIds()), ...reserved]);
      const fresh = neverUsed(used, request.maxWorkerId, need - taken.length + 4);
      if (free.length === 0 && fresh.length === 0) break;
      for (const id of fresh) {
        if (taken.length >= need) break;
        await take(id, true);
      }
    }
    if (taken.length < need) throw await table.exhaustedError();
    await table.checkTaken?.(taken);
    const stored = await table.takenTimestamps();
    const held = taken.map((workerId) => ({ workerId, lastTimestamp: stored.get(workerId) ?? 0 }));
    const primary = held[0]!;
    // An id recycled from a holder whose clock ran ahead starts a little in this clock's future:
    // up to the safety margin, wait it out here rather than refuse the start.
    const wait = checkClockNotBehind({
      component: options.component,
      lastTimestamp: primary.lastTimestamp,
      now: options.clock.now(),
      toleranceMs: Math.max(options.toleranceMs, options.safetyMarginMs),
      source: options.source,
      workerId: primary.workerId,
    });
    const lease = makeLease({ held, sentAt: firstSentAt!, horizon: storedHorizon });
    if (wait > 0) {
      try {
        await delay(wait + 1, request.signal);
      } catch (error) {
        await lease.release().catch(() => {});
        throw error;
      }
      if (lease.lost.aborted) throw lease.lost.reason;
    }
    return lease;
  } catch (error) {
    if (taken.length > 0) await table.giveBack(inserted).catch(() => {});
    if (options.isUnreachable(error)) {
      const cause = error as LeafError;
      throw new LeafError({
        component: options.component,
        code: ErrorCodes.UNAVAILABLE,
        message:
          `${bareMessage(cause)}; lease mode has no local ` +
          "fallback: another node may have taken this node's last id while it was away, and only " +
          "the database can tell",
        details: { ...cause.details },
        cause,
      });
    }
    throw error;
  }
}

/** The first `count` ids in 0..max not in `used`. */
function neverUsed(used: Set<number>, max: number, count: number): number[] {
  const ids: number[] = [];
  for (let id = 0; id <= max && ids.length < count; id++) if (!used.has(id)) ids.push(id);
  return ids;
}

/** The statements of one lease on a table of leased worker ids. */
export interface LeasedIdRows {
  /**
   * Extends the lease on held `workerId` to the store's now + the lease, raising its last
   * timestamp to `timestamp` and its horizon to `horizon`, in one statement guarded by this
   * lease's holder. False when the row no longer carries this lease (taken over or removed).
   */
  renew(workerId: number, timestamp: number, horizon: number): Promise<boolean>;
  /**
   * Frees held `workerId` (holder and horizon cleared), raising its last timestamp to `timestamp`,
   * when the row still carries this lease.
   */
  release(workerId: number, timestamp: number): Promise<void>;
}

/** What a {@link LeasedIdsLease} is set up with. */
export interface LeasedIdsSettings extends LeaseTimings {
  component: string;
  /** The table's name, for messages. */
  table: string;
  /** The clock of the horizons and of a release without a final timestamp. */
  clock: Clock;
  /** Called once when the lease ends (released or lost), so the registry stops tracking it. */
  onEnd(lease: LeasedIdsLease): void;
}

/**
 * Worker ids leased from a table of rows: renews every held row with the horizon (this holder's
 * clock + the lease, the deadline and horizon moving only when all succeeded), loses the lease when
 * a row no longer carries it, fences at lease - margin after the last confirmed renewal (before the
 * store can give the id away), and releases every row with its highest timestamp.
 */
export class LeasedIdsLease extends RenewingLease {
  readonly #settings: LeasedIdsSettings;
  readonly #rows: LeasedIdRows;

  constructor(grant: LeasedIdsGrant, settings: LeasedIdsSettings, rows: LeasedIdRows) {
    const { component, leaseMs, safetyMarginMs, renewIntervalMs, clock } = settings;
    super(
      { component, ...grant.held[0]!, backups: grant.held.slice(1) },
      {
        leaseMs,
        safetyMarginMs,
        renewIntervalMs,
        sentAt: grant.sentAt,
        clock,
        horizon: grant.horizon,
      },
    );
    this.#settings = settings;
    this.#rows = rows;
  }

  /**
   * Frees the ids for other nodes, each with its highest timestamp. Rejects with UNAVAILABLE when
   * the store cannot be reached; the ids then come back when the lease ends, and the stored
   * horizon still covers every id this holder could have issued.
   */
  protected async releaseOnce(): Promise<void> {
    try {
      for (const workerId of this.heldIds()) {
        await this.#rows.release(workerId, this.highest(workerId));
      }
    } finally {
      this.#settings.onEnd(this);
    }
  }

  /**
   * Renews every held row; loses the lease when one no longer carries it. The horizon is past the
   * latest timestamp this holder may issue if this is its last successful renewal: it fences at
   * lease - margin, and the margin absorbs a late fence timer. Reported timestamps count too, in
   * case the generator reads a clock ahead of this registry's.
   */
  protected async renewOnce(): Promise<RenewalConfirmed> {
    const ids = this.heldIds();
    const now = Math.max(this.#settings.clock.now(), ...ids.map((id) => this.highest(id)));
    const horizon = now + this.#settings.leaseMs;
    for (const workerId of ids) {
      const renewed = await this.#rows.renew(workerId, this.highest(workerId), horizon);
      if (this.lost.aborted) throw this.lost.reason;
      if (!renewed) {
        throw this.lose(
          `worker id ${workerId} is no longer held by this node in ${this.#settings.table} ` +
            "(taken over or removed)",
        );
      }
    }
    return { horizon };
  }

  /** No successful renewal for lease - margin: stop before the database may give the id away. */
  protected fenced(silentMs: number): FenceReason {
    const { leaseMs, safetyMarginMs } = this.#settings;
    return {
      why:
        `no successful renewal for ${silentMs} ms (lease ${leaseMs} ms, safety margin ` +
        `${safetyMarginMs} ms): fenced before the database may give the id to another node`,
    };
  }

  /** The lease is lost: no more renewals, and the registry stops tracking it. */
  protected override onLost(reason: LeafError): void {
    super.onLost(reason);
    this.#settings.onEnd(this);
  }
}
