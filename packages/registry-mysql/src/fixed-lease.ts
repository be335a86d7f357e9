import {
  type BackupWorker,
  ErrorCodes,
  isLeafError,
  LeafError,
  type NodeIdentity,
} from "@leaf/core";
import { LeaseCore, writeLeaseCache } from "@leaf/core/adapter";
import type { Connection, ResultSetHeader, RowDataPacket } from "mysql2/promise";
import { COMPONENT, isUnreachable, runOn } from "./database";
import { type FixedSettings, fixedCacheFile, fixedLockName, takeLock } from "./fixed-table";

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

  /**
   * Also writes the cache file at once, before the report waits for MySQL: a restart of this node
   * reads it, so what it holds is confirmed (WorkerLease.confirmedTimestamp) even while MySQL is
   * slow or down. A failed write is reported by the queued store.
   */
  override report(timestampMs: number, backups?: readonly BackupWorker[]): Promise<void> {
    const reporting = super.report(timestampMs, backups);
    if (this.cacheFile && !this.lost.aborted && !this.released) {
      try {
        this.writeCache();
        this.confirm(this.workerId, this.highest(this.workerId));
      } catch {}
    }
    return reporting;
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
      // A restart of this node reads the cache file too: what it holds is confirmed.
      if (this.cacheFile) this.confirm(this.workerId, this.highest(this.workerId));
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
