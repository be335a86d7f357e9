// Worker ids leased from leaf_worker_lease: the statements of one acquire and of one lease. Taking
// an id is one guarded statement judged by the database's clock, so two nodes never win the same
// id; every grant carries a fencing token from a sequence, which its renewals and its release
// match. What taking and holding ids does beyond the statements is core's (grantLeasedIds,
// LeasedIdsLease).
import { type Clock, ErrorCodes, LeafError, type NodeIdentity } from "@leaf/core";
import {
  type CheckedAcquireRequest,
  grantLeasedIds,
  type LeasedIdsGrant,
  LeasedIdsLease,
  type LeasedIdTable,
  type LeaseTimings,
  workerIdsExhaustedError,
} from "@leaf/core/adapter";
import { COMPONENT, type Database, isUnreachable, msFrom, readOnlyError } from "./database";
import { grantSequence } from "./schema";

/** What leasing needs from the registry (with the checked lease timings). */
export interface LeaseSettings extends LeaseTimings {
  db: Database;
  table: string;
  clock: Clock;
  toleranceMs: number;
  /** Called when a lease ends (released or lost), so the registry stops tracking it. */
  forget(lease: PostgresLease): void;
}

/** The database's now + a lease of $n ms. */
const LEASE_END = "now() + $1::bigint * interval '1 millisecond'";

/**
 * The fencing token of a new grant, from the table's sequence, once the server is known to be a
 * primary that takes writes: a standby (`pg_is_in_recovery()`) is refused before anything is
 * written, since its rows may be behind the primary's.
 */
async function grantToken(settings: LeaseSettings): Promise<bigint> {
  const { rows } = await settings.db.query<{ standby: boolean; token: string | null }>(
    "SELECT pg_is_in_recovery() AS standby, " +
      `CASE WHEN pg_is_in_recovery() THEN NULL ELSE nextval('${grantSequence(settings.table)}')::text END AS token`,
    [],
    "taking a fencing token",
  );
  const row = rows[0];
  if (!row || row.standby || row.token === null) {
    throw readOnlyError(
      settings.db.host,
      "taking a fencing token",
      "it is a standby: pg_is_in_recovery() is true",
    );
  }
  return BigInt(row.token);
}

/**
 * Takes 1 + backups worker ids for `request.node`, all or none; or exactly the requested id, else
 * WORKER_ID_IN_USE.
 */
export async function acquireLeased(
  settings: LeaseSettings,
  request: CheckedAcquireRequest,
): Promise<PostgresLease> {
  const { db, table, leaseMs } = settings;
  const name = request.node.name;
  /** This grant's fencing token, taken by prepare(). */
  let token = 0n;
  let tokenText = "";
  const rows: LeasedIdTable = {
    async prepare() {
      token = await grantToken(settings);
      tokenText = token.toString();
    },
    async takeFree(workerId, horizon) {
      // One guarded statement: only a released row or one whose lease ended by the database's
      // clock matches. The previous holder's horizon is folded into last_timestamp before it is
      // replaced.
      const result = await db.query(
        `UPDATE ${table} SET grant_token = $2, holder_ip = $3, holder_port = $4, lease_until = ${LEASE_END}, ` +
          "last_timestamp = GREATEST(last_timestamp, issue_horizon), issue_horizon = $5, " +
          "acquired_at = now(), updated_at = now() " +
          "WHERE leaf_name = $6 AND worker_id = $7 AND (grant_token IS NULL OR lease_until < now())",
        [leaseMs, tokenText, request.node.ip, request.node.port, horizon, name, workerId],
        `taking worker id ${workerId}`,
      );
      return result.rowCount === 1;
    },
    async takeNew(workerId, horizon) {
      // ON CONFLICT DO NOTHING: another node inserted the same id first, the primary key decided.
      const result = await db.query(
        `INSERT INTO ${table} (leaf_name, worker_id, grant_token, holder_ip, holder_port, lease_until, ` +
          `last_timestamp, issue_horizon, acquired_at, updated_at) VALUES ($6, $7, $2, $3, $4, ${LEASE_END}, ` +
          "0, $5, now(), now()) ON CONFLICT (leaf_name, worker_id) DO NOTHING",
        [leaseMs, tokenText, request.node.ip, request.node.port, horizon, name, workerId],
        `taking new worker id ${workerId}`,
      );
      return result.rowCount === 1;
    },
    async freeIds(limit) {
      const { rows: free } = await db.query<{ worker_id: number }>(
        `SELECT worker_id FROM ${table} WHERE leaf_name = $1 AND worker_id <= $2 ` +
          "AND (grant_token IS NULL OR lease_until < now()) " +
          "ORDER BY (holder_ip = $3 AND holder_port = $4) DESC, grant_token IS NULL DESC, worker_id LIMIT $5",
        [name, request.maxWorkerId, request.node.ip, request.node.port, limit],
        "looking for free worker ids",
      );
      return free.map((row) => row.worker_id);
    },
    async usedIds() {
      const { rows: used } = await db.query<{ worker_id: number }>(
        `SELECT worker_id FROM ${table} WHERE leaf_name = $1 AND worker_id <= $2 ORDER BY worker_id`,
        [name, request.maxWorkerId],
        "looking for never-used worker ids",
      );
      return used.map((row) => row.worker_id);
    },
    async takenTimestamps() {
      const { rows: taken } = await db.query<{ worker_id: number; last_timestamp: string }>(
        `SELECT worker_id, last_timestamp FROM ${table} WHERE leaf_name = $1 AND grant_token = $2`,
        [name, tokenText],
        "reading the taken worker ids",
      );
      return new Map(
        taken.map((row) => [row.worker_id, msFrom(row.last_timestamp, `${table}.last_timestamp`)]),
      );
    },
    async giveBack(inserted) {
      // Rows this start inserted have issued nothing: removed, they leave those ids as never used.
      if (inserted.length > 0) {
        await db.query(
          `DELETE FROM ${table} WHERE leaf_name = $1 AND grant_token = $2 AND worker_id = ANY($3::int[])`,
          [name, tokenText, inserted],
          "removing the worker ids of a refused start",
        );
      }
      await db.query(
        `UPDATE ${table} SET grant_token = NULL, lease_until = NULL, issue_horizon = 0 ` +
          "WHERE leaf_name = $1 AND grant_token = $2",
        [name, tokenText],
        "giving back worker ids",
      );
    },
    inUseError: (workerId) => inUse(settings, request, workerId),
    exhaustedError: () => exhausted(settings, request),
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
    (grant) => new PostgresLease(settings, request.node, token, grant),
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
  const { rows } = await settings.db.query<{ holder_ip: string; holder_port: number; ms: string }>(
    "SELECT holder_ip, holder_port, " +
      "GREATEST(floor(extract(epoch FROM lease_until - now()) * 1000), 0)::bigint::text AS ms " +
      `FROM ${settings.table} WHERE leaf_name = $1 AND worker_id = $2`,
    [request.node.name, workerId],
    `reading the holder of worker id ${workerId}`,
  );
  const row = rows[0];
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
  const { rows } = await settings.db.query<{
    worker_id: number;
    holder_ip: string;
    holder_port: number;
    ms: string;
  }>(
    "SELECT worker_id, holder_ip, holder_port, " +
      "GREATEST(floor(extract(epoch FROM lease_until - now()) * 1000), 0)::bigint::text AS ms " +
      `FROM ${settings.table} WHERE leaf_name = $1 AND worker_id <= $2 AND grant_token IS NOT NULL ` +
      "ORDER BY lease_until LIMIT 1",
    [request.node.name, request.maxWorkerId],
    "looking for the next lease to end",
  );
  const soonest = rows[0];
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

/** Worker ids leased through {@link PostgresRegistry}. */
export class PostgresLease extends LeasedIdsLease {
  /**
   * This grant's fencing token (from the table's sequence; larger than every earlier grant's on
   * this database): its rows carry it in `grant_token`, and renewals and the release match it.
   */
  readonly fencingToken: bigint;

  constructor(
    settings: LeaseSettings,
    readonly node: NodeIdentity,
    token: bigint,
    grant: LeasedIdsGrant,
  ) {
    const { db, table, leaseMs } = settings;
    const tokenText = token.toString();
    super(
      grant,
      {
        ...settings,
        component: COMPONENT,
        onEnd: (lease) => settings.forget(lease as PostgresLease),
      },
      {
        async renew(workerId, timestamp, horizon) {
          const result = await db.query(
            `UPDATE ${table} SET lease_until = ${LEASE_END}, last_timestamp = GREATEST(last_timestamp, $2), ` +
              "issue_horizon = GREATEST(issue_horizon, $3), updated_at = now() " +
              "WHERE leaf_name = $4 AND worker_id = $5 AND grant_token = $6",
            [leaseMs, timestamp, horizon, node.name, workerId, tokenText],
            `renewing worker id ${workerId}`,
          );
          return result.rowCount === 1;
        },
        async release(workerId, timestamp) {
          await db.query(
            `UPDATE ${table} SET grant_token = NULL, lease_until = NULL, issue_horizon = 0, ` +
              "last_timestamp = GREATEST(last_timestamp, $1), updated_at = now() " +
              "WHERE leaf_name = $2 AND worker_id = $3 AND grant_token = $4",
            [timestamp, node.name, workerId, tokenText],
            `releasing worker id ${workerId}`,
          );
        },
      },
    );
    this.fencingToken = token;
  }
}
