// Lease mode: worker ids recycled through leaf_worker_lease. Taking an id is one guarded statement
// judged by the database's clock, so two nodes never win the same id; the holder renews well within
// the lease and fences itself (lease.lost) at lease - margin after its last successful renewal, by
// its own monotonic clock, which is before the database lets anyone else take the id.
import { randomBytes } from "node:crypto";
import { type Clock, ErrorCodes, isLeafError, LeafError, type NodeIdentity } from "@leaf/core";
import {
  type CheckedAcquireRequest,
  grantLeasedIds,
  type LeasedIdsGrant,
  LeasedIdsLease,
  type LeasedIdTable,
  type LeaseTimings,
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

/**
 * Takes 1 + backups worker ids for `request.node`, all or none; or exactly the requested id, else
 * WORKER_ID_IN_USE (core's grantLeasedIds, with this table's statements).
 */
export async function acquireLeased(
  settings: LeaseSettings,
  request: CheckedAcquireRequest,
): Promise<LeasedLease> {
  const { db, table, leaseMs } = settings;
  const name = request.node.name;
  const token = `${request.key}#${process.pid}#${randomBytes(8).toString("hex")}`;
  const leaseMicros = leaseMs * 1000;
  const rows: LeasedIdTable = {
    async takeFree(workerId, horizon) {
      // One guarded statement: only a released row or one whose lease ended by the database's
      // clock matches. The previous holder's horizon is folded into last_timestamp before it is
      // replaced.
      const result = await db.query<ResultSetHeader>(
        `UPDATE \`${table}\` SET holder = ?, holder_ip = ?, holder_port = ?, ` +
          "lease_until = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, " +
          "last_timestamp = GREATEST(last_timestamp, issue_horizon), issue_horizon = ?, " +
          "acquired_at = UTC_TIMESTAMP(3), updated_at = UTC_TIMESTAMP(3) " +
          "WHERE leaf_name = ? AND worker_id = ? AND (holder IS NULL OR lease_until < UTC_TIMESTAMP(3))",
        [token, request.node.ip, request.node.port, leaseMicros, horizon, name, workerId],
        `taking worker id ${workerId}`,
      );
      return result.affectedRows === 1;
    },
    async takeNew(workerId, horizon) {
      try {
        await db.query<ResultSetHeader>(
          `INSERT INTO \`${table}\` (leaf_name, worker_id, holder, holder_ip, holder_port, lease_until, ` +
            "last_timestamp, issue_horizon, acquired_at, updated_at) VALUES (?, ?, ?, ?, ?, " +
            "UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, 0, ?, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))",
          [name, workerId, token, request.node.ip, request.node.port, leaseMicros, horizon],
          `taking new worker id ${workerId}`,
        );
        return true;
      } catch (error) {
        // Another node inserted the same id first: the primary key decided.
        if (!(isLeafError(error) && error.details.mysqlCode === "ER_DUP_ENTRY")) throw error;
        return false;
      }
    },
    async freeIds(limit) {
      const free = await db.query<RowDataPacket[]>(
        `SELECT worker_id FROM \`${table}\` WHERE leaf_name = ? AND worker_id <= ? ` +
          "AND (holder IS NULL OR lease_until < UTC_TIMESTAMP(3)) " +
          "ORDER BY (holder_ip = ? AND holder_port = ?) DESC, holder IS NULL DESC, worker_id LIMIT ?",
        [name, request.maxWorkerId, request.node.ip, request.node.port, limit],
        "looking for free worker ids",
      );
      return free.map((row) => Number(row.worker_id));
    },
    async usedIds() {
      const used = await db.query<RowDataPacket[]>(
        `SELECT worker_id FROM \`${table}\` WHERE leaf_name = ? AND worker_id <= ? ORDER BY worker_id`,
        [name, request.maxWorkerId],
        "looking for never-used worker ids",
      );
      return used.map((row) => Number(row.worker_id));
    },
    async takenTimestamps() {
      const taken = await db.query<RowDataPacket[]>(
        `SELECT worker_id, last_timestamp FROM \`${table}\` WHERE leaf_name = ? AND holder = ?`,
        [name, token],
        "reading the taken worker ids",
      );
      return new Map(taken.map((row) => [Number(row.worker_id), toMs(row.last_timestamp)]));
    },
    giveBack: (inserted) => giveBack(settings, name, token, inserted),
    inUseError: (workerId) => inUse(settings, request, workerId),
    exhaustedError: () => exhausted(settings, request),
    // Fixed mode's ids (its table has no service name) are never leased: skipped, and checked
    // again once this start's rows are written.
    async reserved() {
      const fixed = await fixedModeIds(db, settings.fixedTable, request.maxWorkerId);
      const requested = request.workerId === undefined ? undefined : fixed.get(request.workerId);
      if (requested !== undefined) {
        throw usedByFixedMode(request.workerId!, requested, settings.fixedTable, table);
      }
      return new Set(fixed.keys());
    },
    // Read after this start's rows were written: a fixed-mode start racing this one either sees
    // them or inserted its row first, which this read sees.
    async checkTaken(taken) {
      const raced = await fixedModeIds(db, settings.fixedTable, request.maxWorkerId, taken);
      for (const [workerId, ipPort] of raced) {
        throw usedByFixedMode(workerId, ipPort, settings.fixedTable, table);
      }
    },
  };
  return grantLeasedIds(
    rows,
    request,
    {
      component: COMPONENT,
      leaseMs,
      safetyMarginMs: settings.safetyMarginMs,
      toleranceMs: settings.toleranceMs,
      clock: settings.clock,
      source: `${table}.last_timestamp`,
      isUnreachable,
    },
    (grant) => new LeasedLease(settings, request.node, token, grant),
  );
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

/**
 * WORKER_ID_IN_USE for a requested id whose row another holder leases, named with its time left.
 */
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
export class LeasedLease extends LeasedIdsLease {
  /** This lease's holder token in the table's `holder` column. */
  readonly token: string;

  constructor(
    settings: LeaseSettings,
    readonly node: NodeIdentity,
    token: string,
    grant: LeasedIdsGrant,
  ) {
    const { db, table } = settings;
    super(
      grant,
      {
        ...settings,
        component: COMPONENT,
        onEnd: (lease) => settings.forget(lease as LeasedLease),
      },
      {
        async renew(workerId, timestamp, horizon) {
          const result = await db.query<ResultSetHeader>(
            `UPDATE \`${table}\` SET lease_until = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, ` +
              "last_timestamp = GREATEST(last_timestamp, ?), issue_horizon = GREATEST(issue_horizon, ?), " +
              "updated_at = UTC_TIMESTAMP(3) WHERE leaf_name = ? AND worker_id = ? AND holder = ?",
            [settings.leaseMs * 1000, timestamp, horizon, node.name, workerId, token],
            `renewing worker id ${workerId}`,
          );
          return result.affectedRows === 1;
        },
        async release(workerId, timestamp) {
          await db.query<ResultSetHeader>(
            `UPDATE \`${table}\` SET holder = NULL, lease_until = NULL, issue_horizon = 0, ` +
              "last_timestamp = GREATEST(last_timestamp, ?), updated_at = UTC_TIMESTAMP(3) " +
              "WHERE leaf_name = ? AND worker_id = ? AND holder = ?",
            [timestamp, node.name, workerId, token],
            `releasing worker id ${workerId}`,
          );
        },
      },
    );
    this.token = token;
  }
}
