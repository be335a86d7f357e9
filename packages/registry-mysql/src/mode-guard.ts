// Fixed mode and lease mode in one database keep their ids in two tables, so neither sees the
// other's ids unless it looks. Each mode writes its own row first and only then reads the other
// mode's table (a new statement, after its own write committed): of two racing starts the later
// writer always sees the earlier one, so at worst both refuse, never both issue.
import { ErrorCodes, isLeafError, LeafError } from "@leaf/core";
import type { Connection, RowDataPacket } from "mysql2/promise";
import { COMPONENT, type Database, runOn } from "./database";

/** Runs a read; a table that does not exist reads as no rows (that mode was never used here). */
async function readOrNone(read: () => Promise<RowDataPacket[]>): Promise<RowDataPacket[]> {
  try {
    return await read();
  } catch (error) {
    if (isLeafError(error) && error.details.mysqlCode === "ER_NO_SUCH_TABLE") return [];
    throw error;
  }
}

/**
 * The fixed-mode rows (worker id -> ip:port) among `workerIds`, or among all ids up to
 * `maxWorkerId` when `workerIds` is undefined. Fixed mode's table has no service name: each of its
 * ids is taken for every name in the database.
 */
export async function fixedModeIds(
  db: Database,
  fixedTable: string,
  maxWorkerId: number,
  workerIds?: readonly number[],
): Promise<Map<number, string>> {
  if (workerIds?.length === 0) return new Map();
  const rows = await readOrNone(() =>
    workerIds
      ? db.query<RowDataPacket[]>(
          `SELECT id, ip_port FROM \`${fixedTable}\` WHERE id IN (${workerIds.map(() => "?").join(", ")})`,
          [...workerIds],
          `reading fixed mode's ${fixedTable}`,
        )
      : db.query<RowDataPacket[]>(
          `SELECT id, ip_port FROM \`${fixedTable}\` WHERE id <= ?`,
          [maxWorkerId],
          `reading fixed mode's ${fixedTable}`,
        ),
  );
  return new Map(rows.map((row) => [Number(row.id), String(row.ip_port)]));
}

/** WORKER_ID_IN_USE: a lease-mode id is a fixed-mode node's worker id. */
export function usedByFixedMode(
  workerId: number,
  ipPort: string,
  fixedTable: string,
  leaseTable: string,
): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.WORKER_ID_IN_USE,
    message:
      `worker id ${workerId} is fixed mode's id of ${ipPort} (its row in ${fixedTable}, which has ` +
      `no service name, so it holds the id for every name in this database): lease mode ` +
      `(${leaseTable}) must not hand it out too. Use another id, or, once that fixed-mode node is ` +
      "stopped for good and its max_timestamp is in the past, delete its row",
    details: { workerId, fixedNode: ipPort, fixedTable },
  });
}

/**
 * Refuses fixed mode's `workerId` when lease mode has a row of that id for the service `name`
 * (held now, or held before: ids were issued under it). Read on `connection` after the fixed row
 * was written.
 */
export async function refuseLeaseModeRow(
  connection: Connection,
  leaseTable: string,
  name: string,
  workerId: number,
  node: string,
  timeoutMs: number,
): Promise<void> {
  const [row] = await readOrNone(() =>
    runOn<RowDataPacket[]>(
      connection,
      `SELECT holder_ip, holder_port, holder IS NOT NULL AND lease_until >= UTC_TIMESTAMP(3) AS live ` +
        `FROM \`${leaseTable}\` WHERE leaf_name = ? AND worker_id = ?`,
      [name, workerId],
      timeoutMs,
      `reading lease mode's ${leaseTable}`,
    ),
  );
  if (!row) return;
  const holder = `${String(row.holder_ip)}:${String(row.holder_port)}`;
  throw new LeafError({
    component: COMPONENT,
    code: ErrorCodes.WORKER_ID_IN_USE,
    message:
      `worker id ${workerId} of ${node} (fixed mode) is also lease mode's worker id ${workerId} of ` +
      `service ${name} in ${leaseTable} (${Number(row.live) === 1 ? "leased now by" : "last held by"} ` +
      `${holder}): the two modes would issue the same ids. Run a service in one mode only; to move ` +
      "it to lease mode, see the README's procedure",
    details: { workerId, node, leaseTable, leaseHolder: holder },
  });
}
