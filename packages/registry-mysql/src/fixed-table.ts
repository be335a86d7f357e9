// Fixed mode's table and lock: the fork's leaf_workerid_alloc row of each ip:port (found, or
// inserted as its getOrCreateLeafWorkerId does), the MySQL named lock that keeps a second live
// process with the same ip:port off the worker id, and where a node's cache file lives. Shared by
// the acquire path (fixed-mode.ts) and the lease (fixed-lease.ts), which takes the lock again after
// an outage.
import { createHash } from "node:crypto";
import { join } from "node:path";
import { type Clock, ErrorCodes, isLeafError, LeafError, type NodeIdentity } from "@leaf/core";
import type { CheckedAcquireRequest, LeaseCore } from "@leaf/core/adapter";
import type { Connection, ResultSetHeader, RowDataPacket } from "mysql2/promise";
import { COMPONENT, type Database, runOn, toMs } from "./database";

/** What fixed mode needs from the registry. */
export interface FixedSettings {
  db: Database;
  table: string;
  /** Lease mode's table in the same database, checked for this node's id. */
  leaseTable: string;
  clock: Clock;
  toleranceMs: number;
  /** Folder of the fallback cache files; undefined disables the fallback. */
  cacheDir: string | undefined;
  /** Called when a lease ends (released or lost), so the registry stops tracking it. */
  forget(lease: LeaseCore): void;
}

/** The cache file of a node in fixed mode. */
export function fixedCacheFile(cacheDir: string, node: NodeIdentity): string {
  return join(
    cacheDir,
    encodeURIComponent(node.name),
    `${encodeURIComponent(node.ip)}_${node.port}.json`,
  );
}

/** The MySQL named lock guarding a worker id of a fixed-mode table (at most 64 characters). */
export function fixedLockName(database: string, table: string, workerId: number): string {
  const name = `leaf:${database}.${table}:${workerId}`;
  if (name.length <= 64) return name;
  return `leaf:${createHash("sha1").update(name).digest("hex")}:${workerId}`.slice(0, 64);
}

export interface FixedRow {
  id: number;
  maxTimestamp: number;
  database: string;
  /** True when this call inserted the row (the node's first start against this table). */
  inserted: boolean;
}

/** The node's row, inserted when missing (as the fork's getOrCreateLeafWorkerId). */
export async function findOrCreateRow(
  connection: Connection,
  table: string,
  request: CheckedAcquireRequest,
  timeoutMs: number,
): Promise<FixedRow> {
  const select = `SELECT id, max_timestamp, DATABASE() AS db FROM \`${table}\` WHERE ip_port = ?`;
  let inserted = false;
  for (let attempt = 0; attempt < 3; attempt++) {
    const rows = await runOn<RowDataPacket[]>(
      connection,
      select,
      [request.key],
      timeoutMs,
      `reading ${table}`,
    );
    const row = rows[0];
    if (row) {
      return {
        id: Number(row.id),
        maxTimestamp: toMs(row.max_timestamp),
        database: String(row.db),
        inserted,
      };
    }
    try {
      // Only when missing: an INSERT that fails on the unique key still uses up an AUTO_INCREMENT
      // value, and worker ids are scarce.
      await runOn<ResultSetHeader>(
        connection,
        `INSERT INTO \`${table}\` (ip_port, ip, port, max_timestamp, create_time, update_time) ` +
          "VALUES (?, ?, ?, 0, NOW(), NOW())",
        [request.key, request.node.ip, String(request.node.port)],
        timeoutMs,
        `inserting ${request.key} into ${table}`,
      );
      inserted = true;
    } catch (error) {
      // Another process inserted the same ip:port at the same time: read its row.
      if (!(isLeafError(error) && error.details.mysqlCode === "ER_DUP_ENTRY")) throw error;
    }
  }
  throw new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message: `the row of ${request.key} in ${table} keeps disappearing; is another tool deleting rows?`,
  });
}

/**
 * GET_LOCK(name, 0): refuses with WORKER_ID_IN_USE, naming the holder, when another session has it.
 */
export async function takeLock(
  connection: Connection,
  lockName: string,
  workerId: number,
  key: string,
  timeoutMs: number,
): Promise<void> {
  const [row] = await runOn<RowDataPacket[]>(
    connection,
    "SELECT GET_LOCK(?, 0) AS got",
    [lockName],
    timeoutMs,
    `locking worker id ${workerId}`,
  );
  if (Number(row?.got) === 1) return;
  const [holder] = await runOn<RowDataPacket[]>(
    connection,
    "SELECT IS_USED_LOCK(?) AS holder",
    [lockName],
    timeoutMs,
    `finding the holder of worker id ${workerId}`,
  );
  throw new LeafError({
    component: COMPONENT,
    code: ErrorCodes.WORKER_ID_IN_USE,
    message:
      `worker id ${workerId} of ${key} is held by another live process (MySQL connection ` +
      `${holder?.holder ?? "?"} holds lock "${lockName}"): two processes must not run as the same ` +
      "ip:port; stop the other one or give this one another port",
    details: { workerId, node: key, lockName, connectionId: holder?.holder },
  });
}
