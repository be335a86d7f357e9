// Fixed mode, compatible with the Java Leaf fork: one leaf_workerid_alloc row per ip:port, whose
// AUTO_INCREMENT id is the worker id forever; max_timestamp reported every few seconds. Added here:
// a named lock (GET_LOCK) so a second live process with the same ip:port is refused, and a cache
// file used when MySQL is down at start, only after its timestamp passes the clock check.
import { createHash } from "node:crypto";
import { join } from "node:path";
import { type Clock, ErrorCodes, isLeafError, LeafError, type NodeIdentity } from "@leaf/core";
import {
  type CheckedAcquireRequest,
  checkClockNotBehind,
  LeaseCore,
  readLeaseCache,
  writeLeaseCache,
} from "@leaf/core/adapter";
import type { Connection, ResultSetHeader, RowDataPacket } from "mysql2/promise";
import { COMPONENT, type Database, isUnreachable, runOn, toMs } from "./database";

/** What fixed mode needs from the registry. */
export interface FixedSettings {
  db: Database;
  table: string;
  clock: Clock;
  toleranceMs: number;
  /** Folder of the fallback cache files; undefined disables the fallback. */
  cacheDir: string | undefined;
  /** Called when a lease ends (released or lost), so the registry stops tracking it. */
  forget(lease: FixedLease): void;
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

/** Grants the fixed worker id of `request.node`, or falls back to the cache when MySQL is down. */
export async function acquireFixed(
  settings: FixedSettings,
  request: CheckedAcquireRequest,
): Promise<FixedLease> {
  if (request.backups > 0) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.INVALID_ARGUMENT,
      message:
        `${request.backups} backup worker id(s) requested, but fixed mode gives each ip:port ` +
        'exactly one worker id (the fork\'s table); use mode "lease" for backup ids',
      details: { name: "backups", value: request.backups },
    });
  }
  let connection: Connection;
  try {
    connection = await settings.db.hold("taking a fixed worker id");
  } catch (error) {
    if (isUnreachable(error)) return fallback(settings, request, error as LeafError);
    throw error;
  }
  let lockedName: string | undefined;
  try {
    const timeout = settings.db.timeoutMs;
    const row = await findOrCreateRow(connection, settings.table, request, timeout);
    const workerId = row.id;
    if (workerId > request.maxWorkerId) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.WORKER_IDS_EXHAUSTED,
        message:
          `worker id ${workerId} (the id of ${request.key}'s row in ${settings.table}) is outside the ` +
          `layout's range 0..${request.maxWorkerId}: rows are never reused, so this table has ` +
          'handed out more ids than the layout holds; use mode "lease" (ids recycled) or a layout ' +
          "with more worker bits",
        details: { workerId, maxWorkerId: request.maxWorkerId, node: request.key },
      });
    }
    const lockName = fixedLockName(row.database, settings.table, workerId);
    await takeLock(connection, lockName, workerId, request.key, timeout);
    lockedName = lockName;
    // Ids issued while MySQL was down last time are only in the cache file: count them too.
    const stored = Math.max(row.maxTimestamp, cachedTimestamp(settings, request, workerId));
    checkClockNotBehind({
      component: COMPONENT,
      lastTimestamp: stored,
      now: settings.clock.now(),
      toleranceMs: settings.toleranceMs,
      source:
        stored > row.maxTimestamp
          ? `cache file ${fixedCacheFile(settings.cacheDir!, request.node)}`
          : `${settings.table}.max_timestamp of ${request.key}`,
      workerId,
    });
    const lease = new FixedLease(settings, request.node, workerId, stored, lockName);
    lease.writeCache();
    lease.attached(connection);
    return lease;
  } catch (error) {
    // A refused start frees its lock before it returns, so an immediate retry (after the operator
    // fixed the clock) is not refused as "held by another live process": the server drops the
    // lock of a destroyed connection only when it notices the disconnect, a moment later.
    if (lockedName !== undefined) {
      await runOn(
        connection,
        "SELECT RELEASE_LOCK(?)",
        [lockedName],
        settings.db.timeoutMs,
        "releasing the lock of a refused start",
      ).catch(() => undefined);
    }
    // Named locks die with the session: never hand a connection that may hold one back to a pool.
    connection.destroy();
    if (isUnreachable(error)) return fallback(settings, request, error as LeafError);
    throw error;
  }
}

/** MySQL is down: the cached lease, only when its timestamp passes the clock check (Leaf #97). */
function fallback(
  settings: FixedSettings,
  request: CheckedAcquireRequest,
  cause: LeafError,
): FixedLease {
  if (!settings.cacheDir) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `${cause.message.replace(/^\[leaf\] \[[^\]]+\] /, "")}; no fallback: cacheDir is disabled`,
      details: { ...cause.details },
      cause,
    });
  }
  const file = fixedCacheFile(settings.cacheDir, request.node);
  const cached = readLeaseCache(file, COMPONENT);
  if (!cached) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message:
        `${cause.message.replace(/^\[leaf\] \[[^\]]+\] /, "")}; no fallback: ${request.key} has no ` +
        `cache file ${file} (it never started here against MySQL)`,
      details: { ...cause.details, cacheFile: file },
      cause,
    });
  }
  if (
    cached.registry !== "mysql" ||
    cached.node.ip !== request.node.ip ||
    cached.node.port !== request.node.port
  ) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message:
        `cache file ${file} belongs to ${cached.node.ip}:${cached.node.port} (${cached.registry}), ` +
        `not to ${request.key} (mysql): it was copied or edited; delete it`,
      details: { path: file },
    });
  }
  if (cached.workerId > request.maxWorkerId) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.WORKER_IDS_EXHAUSTED,
      message: `cached worker id ${cached.workerId} (${file}) is outside the layout's range 0..${request.maxWorkerId}`,
      details: { workerId: cached.workerId, maxWorkerId: request.maxWorkerId },
    });
  }
  checkClockNotBehind({
    component: COMPONENT,
    lastTimestamp: cached.timestamp,
    now: settings.clock.now(),
    toleranceMs: settings.toleranceMs,
    source: `cache file ${file} (MySQL unreachable: ${cause.details.mysqlCode ?? "no answer"})`,
    workerId: cached.workerId,
  });
  return new FixedLease(settings, request.node, cached.workerId, cached.timestamp, undefined);
}

/**
 * The cached timestamp of this node's worker id, or 0. With MySQL answering, a cache file that is
 * damaged or belongs to another id is ignored (it is rewritten on the first report).
 */
function cachedTimestamp(
  settings: FixedSettings,
  request: CheckedAcquireRequest,
  workerId: number,
): number {
  if (!settings.cacheDir) return 0;
  try {
    const cached = readLeaseCache(fixedCacheFile(settings.cacheDir, request.node), COMPONENT);
    const mine =
      cached?.registry === "mysql" &&
      cached.workerId === workerId &&
      cached.node.ip === request.node.ip &&
      cached.node.port === request.node.port;
    return mine ? cached.timestamp : 0;
  } catch {
    return 0;
  }
}

interface FixedRow {
  id: number;
  maxTimestamp: number;
  database: string;
}

/** The node's row, inserted when missing (as the fork's getOrCreateLeafWorkerId). */
async function findOrCreateRow(
  connection: Connection,
  table: string,
  request: CheckedAcquireRequest,
  timeoutMs: number,
): Promise<FixedRow> {
  const select = `SELECT id, max_timestamp, DATABASE() AS db FROM \`${table}\` WHERE ip_port = ?`;
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

/** GET_LOCK(name, 0): refuses with WORKER_ID_IN_USE, naming the holder, when another session has it. */
async function takeLock(
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

/** A fixed worker id held through {@link MysqlRegistry} in fixed mode. */
export class FixedLease extends LeaseCore {
  /** True when granted from the cache file because MySQL was unreachable at start. */
  readonly fromCache: boolean;
  private lockConnection: Connection | undefined;
  private currentLockName: string | undefined;

  constructor(
    private readonly settings: FixedSettings,
    readonly node: NodeIdentity,
    workerId: number,
    lastTimestamp: number,
    lockName: string | undefined,
  ) {
    super({ component: COMPONENT, workerId, lastTimestamp });
    this.fromCache = lockName === undefined;
    this.currentLockName = lockName;
  }

  /** The MySQL named lock that keeps other processes off this worker id (once connected). */
  get lockName(): string | undefined {
    return this.currentLockName;
  }

  /** The cache file used when MySQL is unreachable at start; undefined when disabled. */
  get cacheFile(): string | undefined {
    return this.settings.cacheDir ? fixedCacheFile(this.settings.cacheDir, this.node) : undefined;
  }

  /** Keeps `connection` (holding the named lock) until release; a broken one is dropped. */
  attached(connection: Connection): void {
    this.lockConnection = connection;
    connection.on("error", () => {
      if (this.lockConnection === connection) this.lockConnection = undefined;
    });
  }

  /**
   * Raises max_timestamp (never lowers it) and rewrites the cache file. While the lock session is
   * gone (MySQL was down) it reconnects first: when another process took the lock meanwhile, or the
   * row now belongs to another id, the lease is lost. Rejects with UNAVAILABLE when MySQL cannot be
   * reached; the id stays fixed, so the generator keeps running. (Fixed mode has no backup ids.)
   */
  protected async store(): Promise<void> {
    await this.write();
  }

  /** Writes the final timestamp, frees the lock (the row stays this node's). */
  protected async free(finalTimestampMs: number | undefined): Promise<void> {
    try {
      if (!this.lost.aborted && finalTimestampMs !== undefined) await this.write();
    } catch (error) {
      // A lease found lost while releasing has nothing left to release.
      if (!isLeafError(error, ErrorCodes.LEASE_LOST)) throw error;
    } finally {
      await this.unlock();
      this.settings.forget(this);
    }
  }

  /** Ends the lease without a final report (the registry is closing): the lock session closes. */
  abandon(why: string): void {
    if (!this.released) this.lose(why);
    this.lockConnection?.destroy();
    this.lockConnection = undefined;
  }

  /** Rewrites the cache file with the highest timestamp; throws UNAVAILABLE when it cannot. */
  writeCache(): void {
    const file = this.cacheFile;
    if (!file) return;
    try {
      writeLeaseCache(file, {
        node: { name: this.node.name, ip: this.node.ip, port: this.node.port },
        workerId: this.workerId,
        timestamp: this.highest(this.workerId),
        registry: "mysql",
      });
    } catch (error) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.UNAVAILABLE,
        message:
          `could not write cache file ${file}: ${(error as Error).message}; set cacheDir to a ` +
          "writable folder, or cacheDir: false to run without the fallback",
        details: { path: file },
        cause: error,
      });
    }
  }

  private async write(): Promise<void> {
    if (this.lost.aborted) throw this.lost.reason;
    // The cache file is written even when MySQL is down: it is what a restart falls back on.
    let cacheError: unknown;
    try {
      this.writeCache();
    } catch (error) {
      cacheError = error;
    }
    await this.writeRow();
    if (cacheError) throw cacheError;
  }

  private async writeRow(): Promise<void> {
    const connection = this.lockConnection ?? (await this.reattach());
    const timeout = this.settings.db.timeoutMs;
    try {
      const result = await runOn<ResultSetHeader>(
        connection,
        `UPDATE \`${this.settings.table}\` SET max_timestamp = GREATEST(COALESCE(max_timestamp, 0), ?), ` +
          "update_time = NOW() WHERE id = ? AND ip_port = ?",
        [this.highest(this.workerId), this.workerId, `${this.node.ip}:${this.node.port}`],
        timeout,
        `reporting worker id ${this.workerId}`,
      );
      // 0 rows: the row is gone, or (on a pool without mysql2's FOUND_ROWS flag) nothing changed.
      if (result.affectedRows === 0 && !(await this.rowExists(connection))) {
        throw this.lose(
          `its row in ${this.settings.table} was deleted or now belongs to another node`,
        );
      }
    } catch (error) {
      if (isUnreachable(error)) this.dropConnection(connection);
      throw error;
    }
  }

  private async rowExists(connection: Connection): Promise<boolean> {
    const rows = await runOn<RowDataPacket[]>(
      connection,
      `SELECT id FROM \`${this.settings.table}\` WHERE id = ? AND ip_port = ?`,
      [this.workerId, `${this.node.ip}:${this.node.port}`],
      this.settings.db.timeoutMs,
      `checking the row of worker id ${this.workerId}`,
    );
    return rows.length > 0;
  }

  /** Reconnects after MySQL was unreachable and takes the named lock again. */
  private async reattach(): Promise<Connection> {
    const key = `${this.node.ip}:${this.node.port}`;
    const connection = await this.settings.db.hold(`reconnecting worker id ${this.workerId}`);
    try {
      const timeout = this.settings.db.timeoutMs;
      const rows = await runOn<RowDataPacket[]>(
        connection,
        `SELECT id, DATABASE() AS db FROM \`${this.settings.table}\` WHERE ip_port = ?`,
        [key],
        timeout,
        `checking the row of ${key}`,
      );
      const row = rows[0];
      if (!row || Number(row.id) !== this.workerId) {
        throw this.lose(
          row
            ? `the row of ${key} in ${this.settings.table} now has id ${row.id}`
            : `the row of ${key} in ${this.settings.table} was deleted`,
        );
      }
      const lockName = fixedLockName(String(row!.db), this.settings.table, this.workerId);
      try {
        await takeLock(connection, lockName, this.workerId, key, timeout);
      } catch (error) {
        if (isLeafError(error, ErrorCodes.WORKER_ID_IN_USE)) {
          throw this.lose(
            `another process took its lock while MySQL was unreachable (${error.message})`,
          );
        }
        throw error;
      }
      this.checkUsable();
      this.currentLockName = lockName;
      this.attached(connection);
      return connection;
    } catch (error) {
      connection.destroy();
      throw error;
    }
  }

  private async unlock(): Promise<void> {
    const connection = this.lockConnection;
    this.lockConnection = undefined;
    if (!connection) return;
    try {
      await runOn(
        connection,
        "SELECT RELEASE_LOCK(?)",
        [this.currentLockName],
        this.settings.db.timeoutMs,
        `unlocking worker id ${this.workerId}`,
      );
      this.settings.db.giveBack(connection);
    } catch {
      connection.destroy();
    }
  }

  private dropConnection(connection: Connection): void {
    if (this.lockConnection === connection) this.lockConnection = undefined;
    connection.destroy();
  }

  /** The lease is lost: the registry stops tracking it. */
  protected override onLost(): void {
    this.settings.forget(this);
  }
}
