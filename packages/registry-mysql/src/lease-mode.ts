// Lease mode: worker ids recycled through leaf_worker_lease. Taking an id is one guarded statement
// judged by the database's clock, so two nodes never win the same id; the holder renews well within
// the lease and fences itself (lease.lost) at lease - margin after its last successful renewal, by
// its own monotonic clock, which is before the database lets anyone else take the id.
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import {
  type BackupWorker,
  type Clock,
  delay,
  ErrorCodes,
  isLeafError,
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
import type { ResultSetHeader, RowDataPacket } from "mysql2/promise";
import { COMPONENT, type Database, isUnreachable, toMs } from "./database";
import { fixedModeIds, usedByFixedMode } from "./mode-guard";

/** What lease mode needs from the registry (with the checked lease timings). */
export interface LeaseSettings extends LeaseTimings {
  db: Database;
  table: string;
  /** Fixed mode's table in the same database: its ids are never leased. */
  fixedTable: string;
  clock: Clock;
  toleranceMs: number;
  /** Called when a lease ends (released or lost), so the registry stops tracking it. */
  forget(lease: LeasedLease): void;
}

/** Rounds of "look for free ids, try to take them" before concluding that none is left. */
const MAX_ROUNDS = 10;

/**
 * Takes 1 + backups worker ids for `request.node`, all or none; or exactly the requested id, else
 * WORKER_ID_IN_USE.
 */
export async function acquireLeased(
  settings: LeaseSettings,
  request: CheckedAcquireRequest,
): Promise<LeasedLease> {
  const { db, table, leaseMs } = settings;
  const name = request.node.name;
  const need = 1 + request.backups;
  const token = `${request.key}#${process.pid}#${randomBytes(8).toString("hex")}`;
  const leaseMicros = leaseMs * 1000;
  const taken: number[] = [];
  /** Ids this start inserted (never used before): removed again when the start is refused. */
  const inserted: number[] = [];
  let firstSentAt: number | undefined;
  /** The lowest horizon written for a taken id: the lease's confirmed horizon. */
  let storedHorizon = Number.POSITIVE_INFINITY;

  /**
   * The holder's own clock + lease: it fences at lease - margin without a renewal, so it issues
   * nothing later than that even when its fence timer fires late by up to the margin.
   */
  const horizon = () => settings.clock.now() + leaseMs;

  const takeFree = async (workerId: number): Promise<void> => {
    const sentAt = performance.now();
    const written = horizon();
    // One guarded statement: only a released row or one whose lease ended by the database's clock
    // matches. The previous holder's horizon is folded into last_timestamp before it is replaced.
    const result = await db.query<ResultSetHeader>(
      `UPDATE \`${table}\` SET holder = ?, holder_ip = ?, holder_port = ?, ` +
        "lease_until = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, " +
        "last_timestamp = GREATEST(last_timestamp, issue_horizon), issue_horizon = ?, " +
        "acquired_at = UTC_TIMESTAMP(3), updated_at = UTC_TIMESTAMP(3) " +
        "WHERE leaf_name = ? AND worker_id = ? AND (holder IS NULL OR lease_until < UTC_TIMESTAMP(3))",
      [token, request.node.ip, request.node.port, leaseMicros, written, name, workerId],
      `taking worker id ${workerId}`,
    );
    if (result.affectedRows === 1) {
      taken.push(workerId);
      firstSentAt ??= sentAt;
      storedHorizon = Math.min(storedHorizon, written);
    }
  };

  const takeNew = async (workerId: number): Promise<void> => {
    const sentAt = performance.now();
    const written = horizon();
    try {
      await db.query<ResultSetHeader>(
        `INSERT INTO \`${table}\` (leaf_name, worker_id, holder, holder_ip, holder_port, lease_until, ` +
          "last_timestamp, issue_horizon, acquired_at, updated_at) VALUES (?, ?, ?, ?, ?, " +
          "UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, 0, ?, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))",
        [name, workerId, token, request.node.ip, request.node.port, leaseMicros, written],
        `taking new worker id ${workerId}`,
      );
      taken.push(workerId);
      inserted.push(workerId);
      firstSentAt ??= sentAt;
      storedHorizon = Math.min(storedHorizon, written);
    } catch (error) {
      // Another node inserted the same id first: the primary key decided.
      if (!(isLeafError(error) && error.details.mysqlCode === "ER_DUP_ENTRY")) throw error;
    }
  };

  try {
    // Fixed mode's ids (its table has no service name) are never leased: skipped here, and checked
    // again below once this start's rows are written.
    const fixed = await fixedModeIds(db, settings.fixedTable, request.maxWorkerId);
    const requestedFixed = request.workerId === undefined ? undefined : fixed.get(request.workerId);
    if (requestedFixed !== undefined) {
      throw usedByFixedMode(request.workerId!, requestedFixed, settings.fixedTable, table);
    }
    if (request.workerId !== undefined) {
      // A requested id (a StatefulSet ordinal): that row only, released, expired or never used.
      await takeFree(request.workerId);
      if (taken.length === 0) await takeNew(request.workerId);
      if (taken.length === 0) throw await inUse(settings, request, request.workerId);
    }
    for (let round = 0; round < MAX_ROUNDS && taken.length < need; round++) {
      request.signal?.throwIfAborted();
      // Released or expired ids: this node's former ids first, then released ones (no horizon to
      // wait out), lowest first.
      const free = await db.query<RowDataPacket[]>(
        `SELECT worker_id FROM \`${table}\` WHERE leaf_name = ? AND worker_id <= ? ` +
          "AND (holder IS NULL OR lease_until < UTC_TIMESTAMP(3)) " +
          "ORDER BY (holder_ip = ? AND holder_port = ?) DESC, holder IS NULL DESC, worker_id LIMIT ?",
        [name, request.maxWorkerId, request.node.ip, request.node.port, need * 4 + 8],
        "looking for free worker ids",
      );
      for (const row of free) {
        if (taken.length >= need) break;
        const id = Number(row.worker_id);
        if (!taken.includes(id) && !fixed.has(id)) await takeFree(id);
      }
      if (taken.length >= need) break;
      const used = await db.query<RowDataPacket[]>(
        `SELECT worker_id FROM \`${table}\` WHERE leaf_name = ? AND worker_id <= ? ORDER BY worker_id`,
        [name, request.maxWorkerId],
        "looking for never-used worker ids",
      );
      const fresh = neverUsed(
        new Set([...used.map((r) => Number(r.worker_id)), ...fixed.keys()]),
        request.maxWorkerId,
        need - taken.length + 4,
      );
      if (free.length === 0 && fresh.length === 0) break;
      for (const id of fresh) {
        if (taken.length >= need) break;
        await takeNew(id);
      }
    }
    if (taken.length < need) throw await exhausted(settings, request);
    // Read after this start's rows were written: a fixed-mode start racing this one either sees
    // them or inserted its row first, which this read sees.
    const raced = await fixedModeIds(db, settings.fixedTable, request.maxWorkerId, taken);
    for (const [workerId, ipPort] of raced) {
      throw usedByFixedMode(workerId, ipPort, settings.fixedTable, table);
    }
    const rows = await db.query<RowDataPacket[]>(
      `SELECT worker_id, last_timestamp FROM \`${table}\` WHERE leaf_name = ? AND holder = ?`,
      [name, token],
      "reading the taken worker ids",
    );
    const stored = new Map(rows.map((r) => [Number(r.worker_id), toMs(r.last_timestamp)]));
    const held = taken.map((workerId) => ({ workerId, lastTimestamp: stored.get(workerId) ?? 0 }));
    const primary = held[0]!;
    // An id recycled from a holder whose clock ran ahead starts a little in this clock's future:
    // up to the safety margin, wait it out here rather than refuse the start.
    const wait = checkClockNotBehind({
      component: COMPONENT,
      lastTimestamp: primary.lastTimestamp,
      now: settings.clock.now(),
      toleranceMs: Math.max(settings.toleranceMs, settings.safetyMarginMs),
      source: `${table}.last_timestamp`,
      workerId: primary.workerId,
    });
    const lease = new LeasedLease(settings, request.node, token, held, firstSentAt!, storedHorizon);
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
    if (taken.length > 0) await giveBack(settings, name, token, inserted).catch(() => {});
    if (isUnreachable(error)) {
      const cause = error as LeafError;
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.UNAVAILABLE,
        message:
          `${cause.message.replace(/^\[leaf\] \[[^\]]+\] /, "")}; lease mode has no local ` +
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

/** Frees ids taken by an acquire that then failed; they issued nothing, so timestamps stay. */
async function giveBack(
  settings: LeaseSettings,
  name: string,
  token: string,
  inserted: readonly number[] = [],
): Promise<void> {
  // Rows this start inserted have issued nothing: removed, they leave those ids free of lease
  // mode's history (fixed mode refuses an id lease mode ever used).
  if (inserted.length > 0) {
    await settings.db.query(
      `DELETE FROM \`${settings.table}\` WHERE leaf_name = ? AND holder = ? ` +
        `AND worker_id IN (${inserted.map(() => "?").join(", ")})`,
      [name, token, ...inserted],
      "removing the worker ids of a refused start",
    );
  }
  await settings.db.query(
    `UPDATE \`${settings.table}\` SET holder = NULL, lease_until = NULL, issue_horizon = 0 ` +
      "WHERE leaf_name = ? AND holder = ?",
    [name, token],
    "giving back worker ids",
  );
}

/** WORKER_ID_IN_USE for a requested id whose row another holder leases, named with its time left. */
async function inUse(
  settings: LeaseSettings,
  request: CheckedAcquireRequest,
  workerId: number,
): Promise<LeafError> {
  const [row] = await settings.db.query<RowDataPacket[]>(
    "SELECT holder_ip, holder_port, " +
      "GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), lease_until) DIV 1000, 0) AS ms " +
      `FROM \`${settings.table}\` WHERE leaf_name = ? AND worker_id = ?`,
    [request.node.name, workerId],
    `reading the holder of worker id ${workerId}`,
  );
  const holder = row ? `${row.holder_ip}:${row.holder_port}` : "another node";
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.WORKER_ID_IN_USE,
    message:
      `worker id ${workerId} requested by ${request.key} is leased in ${settings.table} to ${holder}` +
      `${row ? ` for ${row.ms} ms more unless renewed` : ""}; stop that node (a pod with the same ` +
      "StatefulSet ordinal still running?) and start this one again once its lease ends",
    details: { workerId, holder, table: settings.table },
  });
}

/** WORKER_IDS_EXHAUSTED naming the lease that ends soonest, by the database's clock. */
async function exhausted(
  settings: LeaseSettings,
  request: CheckedAcquireRequest,
): Promise<LeafError> {
  const [soonest] = await settings.db.query<RowDataPacket[]>(
    "SELECT worker_id, holder_ip, holder_port, " +
      "GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), lease_until) DIV 1000, 0) AS ms " +
      `FROM \`${settings.table}\` WHERE leaf_name = ? AND worker_id <= ? AND holder IS NOT NULL ` +
      "ORDER BY lease_until LIMIT 1",
    [request.node.name, request.maxWorkerId],
    "looking for the next lease to end",
  );
  return workerIdsExhaustedError(
    COMPONENT,
    request,
    settings.leaseMs,
    soonest && {
      workerId: soonest.worker_id,
      ip: soonest.holder_ip,
      port: soonest.holder_port,
      ms: soonest.ms,
    },
  );
}

/** Worker ids leased through {@link MysqlRegistry} in lease mode. */
export class LeasedLease extends RenewingLease {
  /** This lease's holder token in the table's `holder` column. */
  readonly token: string;

  constructor(
    private readonly settings: LeaseSettings,
    readonly node: NodeIdentity,
    token: string,
    held: BackupWorker[],
    sentAt: number,
    /** The lowest issue_horizon the acquire wrote for a taken id. */
    horizon: number,
  ) {
    const { leaseMs, safetyMarginMs, renewIntervalMs, clock } = settings;
    super(
      { component: COMPONENT, ...held[0]!, backups: held.slice(1) },
      { leaseMs, safetyMarginMs, renewIntervalMs, sentAt, clock, horizon },
    );
    this.token = token;
  }

  /**
   * Frees the ids for other nodes: writes the final timestamp (default: the later of the last report
   * and the clock), clears the holder. Rejects with UNAVAILABLE when MySQL cannot be reached; the
   * ids then come back when the lease ends, and the stored horizon still covers every id this
   * holder could have issued.
   */
  protected async releaseOnce(): Promise<void> {
    try {
      for (const workerId of this.heldIds()) {
        await this.settings.db.query<ResultSetHeader>(
          `UPDATE \`${this.settings.table}\` SET holder = NULL, lease_until = NULL, issue_horizon = 0, ` +
            "last_timestamp = GREATEST(last_timestamp, ?), updated_at = UTC_TIMESTAMP(3) " +
            "WHERE leaf_name = ? AND worker_id = ? AND holder = ?",
          [this.highest(workerId), this.node.name, workerId, this.token],
          `releasing worker id ${workerId}`,
        );
      }
    } finally {
      this.settings.forget(this);
    }
  }

  /**
   * Extends the lease of every held id by one guarded UPDATE each (the deadline and the horizon
   * move only when all succeeded); loses the lease when a row no longer carries this holder's token.
   */
  protected async renewOnce(): Promise<RenewalConfirmed> {
    // Past the latest timestamp this holder may issue if this is its last successful renewal: it
    // fences at lease - margin, and the margin absorbs a late fence timer. Reported timestamps count
    // too, in case the generator reads a clock ahead of this registry's.
    const ids = this.heldIds();
    const now = Math.max(this.settings.clock.now(), ...ids.map((id) => this.highest(id)));
    const horizon = now + this.settings.leaseMs;
    for (const workerId of ids) {
      const result = await this.settings.db.query<ResultSetHeader>(
        `UPDATE \`${this.settings.table}\` SET lease_until = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, ` +
          "last_timestamp = GREATEST(last_timestamp, ?), issue_horizon = GREATEST(issue_horizon, ?), " +
          "updated_at = UTC_TIMESTAMP(3) WHERE leaf_name = ? AND worker_id = ? AND holder = ?",
        [
          this.settings.leaseMs * 1000,
          this.highest(workerId),
          horizon,
          this.node.name,
          workerId,
          this.token,
        ],
        `renewing worker id ${workerId}`,
      );
      if (this.lost.aborted) throw this.lost.reason;
      if (result.affectedRows !== 1) {
        throw this.lose(
          `worker id ${workerId} is no longer held by this node in ${this.settings.table} ` +
            "(taken over or removed)",
        );
      }
    }
    return { horizon };
  }

  /** No successful renewal for lease - margin: stop before the database may give the id away. */
  protected fenced(silentMs: number): FenceReason {
    return {
      why:
        `no successful renewal for ${silentMs} ms (lease ${this.settings.leaseMs} ms, safety margin ` +
        `${this.settings.safetyMarginMs} ms): fenced before the database may give the id to another node`,
    };
  }

  /** The lease is lost: no more renewals, and the registry stops tracking it. */
  protected override onLost(reason: LeafError): void {
    super.onLost(reason);
    this.settings.forget(this);
  }
}
