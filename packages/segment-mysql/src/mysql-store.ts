// The MySQL segment store: Java Leaf's leaf_alloc table on mysql2. A range is Leaf's
// update-then-select in one transaction, sent as one round trip; several hosts in failover order,
// never a range from a read-only server (a replica), whatever the user's privileges, and none while
// more than one listed host is writable (a split brain) or from a host whose max id is behind.
// A change that sets a value (a give-back, a new tag, a step, a delete) is sent at most once: a
// copy the server still holds could run after other changes and undo them. The host failover, the
// once-only writes and the range checks are @leaf/segment's HostedRanges, shared with the
// PostgreSQL store; this file holds the SQL and mysql2's side of them.
import { classifyMysqlError, mysqlError, OpenSockets } from "@leaf/mysql-support";
import type { NewTag, ResidueRecord, SegmentRange, SegmentStore, TagRecord } from "@leaf/segment";
import {
  belowDeletedTag,
  COMPONENT,
  checkExpectedVersion,
  checkResidueRecord,
  checkStep,
  checkTag,
  type HostDriver,
  HostedRanges,
  MAX_ID,
  normalizeNewTag,
  ReadOnlyHost,
  STORE_FIXES,
  type TagRow,
  tagExists,
  tagRecordOf,
  unknownTag,
} from "@leaf/segment/adapter";
import type { PoolCluster, PoolConnection, ResultSetHeader, RowDataPacket } from "mysql2/promise";
import {
  deletedTableName,
  deletedTagsSchema,
  leafAllocSchema,
  quoteTable,
} from "./leaf-alloc-schema";
import { MysqlResidueTable } from "./mysql-residue";
import {
  hostCluster,
  type MysqlSegmentStoreOptions,
  type MysqlStoreStats,
  nodeId,
} from "./mysql-store-options";

export type { MysqlSegmentStoreOptions, MysqlStoreStats } from "./mysql-store-options";

/**
 * Raised inside a host attempt when the server is read-only: move to the next host. It carries the
 * error MySQL itself gives a write on a read-only server, so it is classified the same way.
 */
class MysqlReadOnly extends ReadOnlyHost {
  readonly errno = 1290;
  readonly code = "ER_OPTION_PREVENTS_STATEMENT";
  readonly sqlState = "HY000";
}

interface RangeRow extends RowDataPacket {
  biz_tag: string;
  max_id: string;
  step: number;
  read_only: number | string;
}

interface DeletedRow extends RowDataPacket {
  max_id: string;
}

type TagRowPacket = TagRow & RowDataPacket;

/**
 * A {@link SegmentStore} on Java Leaf's `leaf_alloc` table.
 *
 * Taking a range sends `START TRANSACTION; UPDATE ... SET max_id = max_id + step WHERE biz_tag = ?
 * AND @@global.read_only = 0; SELECT ...; COMMIT` as one multi-statement round trip; values are
 * parameters, escaped by mysql2, never concatenated. BIGINTs travel as strings and become bigint.
 * With several hosts the store uses one at a time and moves to the next when it fails or is
 * read-only, staying there until that one fails (no flapping back).
 */
export class MysqlSegmentStore implements SegmentStore {
  readonly kind = "mysql";
  private readonly cluster: PoolCluster;
  private readonly hostNames: string[];
  private readonly table: string;
  private readonly tableName: string;
  /** The deleted tags' table, quoted (see {@link deletedTableName}). */
  private readonly deletedTable: string;
  private readonly database: string | undefined;
  private readonly queryTimeoutMs: number;
  /** Host failover, once-only writes, range checks and counters (shared with other SQL stores). */
  private readonly ranges: HostedRanges<PoolConnection>;
  /** The residue record, when the database is in a residue set (`leaf_alloc_residue`). */
  private readonly residue: MysqlResidueTable;
  /** The sockets of the connections this store used that are still open (see {@link close}). */
  private readonly sockets = new OpenSockets();

  constructor(options: MysqlSegmentStoreOptions) {
    const hosts = hostCluster(options);
    this.cluster = hosts.cluster;
    this.hostNames = hosts.hostNames;
    this.database = hosts.database;
    this.tableName = hosts.tableName;
    this.table = quoteTable(hosts.tableName);
    this.deletedTable = quoteTable(deletedTableName(hosts.tableName));
    this.queryTimeoutMs = hosts.queryTimeoutMs;
    this.ranges = new HostedRanges({
      driver: this.driver(),
      where: this.where(),
      name: "the MySQL segment store",
    });
    this.residue = new MysqlResidueTable(
      hosts.tableName,
      (conn, sql, values) => this.send(conn, sql, values),
      () => new MysqlReadOnly("@@global.read_only is ON"),
    );
  }

  /**
   * Creates the `leaf_alloc` table (Java Leaf's, column for column) and the deleted tags' table
   * (`leaf_alloc_deleted`, which Java Leaf never reads) when they do not exist.
   */
  async createSchema(): Promise<void> {
    await this.ranges.createSchema([
      leafAllocSchema(this.tableName),
      deletedTagsSchema(this.tableName),
    ]);
  }

  async listTags(): Promise<string[]> {
    const rows = await this.ranges.run("listing tags", async (conn) => {
      const [result] = await this.send<RowDataPacket[]>(conn, `SELECT biz_tag FROM ${this.table}`);
      return result;
    });
    return rows.map((row) => String(row.biz_tag));
  }

  async describeTags(): Promise<TagRecord[]> {
    const rows = await this.ranges.run("describing tags", async (conn) => {
      const [result] = await this.send<TagRowPacket[]>(
        conn,
        `SELECT biz_tag, max_id, step, description, CAST(UNIX_TIMESTAMP(update_time) AS SIGNED) AS updated FROM ${this.table} ORDER BY biz_tag`,
      );
      return result;
    });
    return rows.map(tagRecordOf);
  }

  /**
   * Takes a range on the host in use. The `UPDATE` changes the row only when the server is
   * writable, the stored step is at least 1 and the max id is at least the end of every range this
   * store handed out before the call and the caller's `floor` (so a max id moved back, or a
   * failover to a server that lost writes, is refused without advancing it further). The refusals and the split-brain check are
   * `HostedRanges.takeRange`'s.
   */
  async takeRange(tag: string, step?: number, floor?: bigint): Promise<SegmentRange> {
    return this.ranges.takeRange(
      tag,
      step,
      async (conn, floor) => {
        // The max_id bound refuses a range past 2^63 - 1 before MySQL would raise "out of range".
        const update =
          step === undefined
            ? `UPDATE ${this.table} SET max_id = max_id + step WHERE biz_tag = ? AND step >= 1 AND max_id >= ? AND max_id <= ${MAX_ID} - step AND @@global.read_only = 0`
            : `UPDATE ${this.table} SET max_id = max_id + ? WHERE biz_tag = ? AND step >= 1 AND max_id >= ? AND max_id <= ? AND @@global.read_only = 0`;
        const values =
          step === undefined ? [tag, floor] : [step, tag, floor, MAX_ID - BigInt(step)];
        const [results] = await this.send<
          [ResultSetHeader, ResultSetHeader, RangeRow[], ResultSetHeader]
        >(
          conn,
          `START TRANSACTION; ${update}; SELECT biz_tag, max_id, step, @@global.read_only AS read_only FROM ${this.table} WHERE biz_tag = ?; COMMIT`,
          [...values, tag],
        );
        const row = results[2][0];
        if (!row) throw unknownTag(tag, this.where());
        const maxId = BigInt(row.max_id);
        if (results[1].affectedRows === 1) return { taken: { maxId, tableStep: Number(row.step) } };
        if (Number(row.read_only) !== 0) throw new MysqlReadOnly("@@global.read_only is ON");
        return { unchanged: { maxId, step: row.step } };
      },
      floor,
    );
  }

  /**
   * Gives back `[from, end)` (see {@link SegmentStore.giveBack}): `UPDATE ... SET max_id = from
   * WHERE biz_tag = ? AND max_id = end AND @@global.read_only = 0`, one statement, so the compare
   * and the set are atomic against every process taking ranges from the row. A read-only host is
   * skipped as for ranges; on the next host the compare is made again. The UPDATE is sent at most
   * once: when its answer does not come (a timeout, a lost connection) the call rejects with
   * UNAVAILABLE (`details.reason` "outcome-unknown") and the ids are a gap. Sent again, a copy
   * still queued on the server (behind a row lock) could run after another process took
   * `[from, end)` and find the max id back at `end`, and give back ids that process holds.
   */
  async giveBack(tag: string, from: bigint, end: bigint): Promise<boolean> {
    return this.ranges.giveBack(tag, from, end, async (conn) => {
      const [results] = await this.send<[ResultSetHeader, RowDataPacket[]]>(
        conn,
        `UPDATE ${this.table} SET max_id = ? WHERE biz_tag = ? AND max_id = ? AND @@global.read_only = 0; SELECT @@global.read_only AS read_only`,
        [from, tag, end],
      );
      if (results[0].affectedRows === 1) return true;
      if (Number(results[1][0]?.read_only) !== 0)
        throw new MysqlReadOnly("@@global.read_only is ON");
      return false;
    });
  }

  /**
   * Inserts the tag's row and, in the same transaction, reads the max id it had when it was last
   * deleted (a locking read, so a delete committing meanwhile is seen): below it, the insert is
   * rolled back and the call rejects with ALREADY_EXISTS, `details.reason` "deleted". Sent at most
   * once (see {@link giveBack}).
   */
  async createTag(input: NewTag): Promise<TagRecord> {
    const tag = normalizeNewTag(input);
    return this.ranges.write(
      `creating tag ${JSON.stringify(tag.tag)}`,
      async (conn) => {
        let results: [ResultSetHeader, ResultSetHeader, DeletedRow[]];
        try {
          [results] = await this.send<[ResultSetHeader, ResultSetHeader, DeletedRow[]]>(
            conn,
            `START TRANSACTION; INSERT INTO ${this.table} (biz_tag, max_id, step, description) SELECT ?, ?, ?, ? FROM DUAL WHERE @@global.read_only = 0; SELECT max_id FROM ${this.deletedTable} WHERE biz_tag = ? LOCK IN SHARE MODE`,
            [tag.tag, tag.startId, tag.step, tag.description, tag.tag],
          );
        } catch (error) {
          if ((error as { errno?: number }).errno === 1062) throw tagExists(tag.tag, this.where());
          throw error;
        }
        // Every error below drops the connection, which rolls the transaction back.
        if (results[1].affectedRows !== 1) throw new MysqlReadOnly("@@global.read_only is ON");
        const deleted = results[2][0];
        if (deleted && BigInt(deleted.max_id) > tag.startId) {
          throw belowDeletedTag(tag.tag, tag.startId, BigInt(deleted.max_id), this.where());
        }
        const [done] = await this.send<[ResultSetHeader, TagRowPacket[]]>(
          conn,
          `COMMIT; ${this.selectOne()}`,
          [tag.tag],
        );
        return tagRecordOf(done[1][0]!);
      },
      (conn) => this.ensureDeletedTable(conn),
    );
  }

  /** Sent at most once (see {@link giveBack}). */
  async updateStep(tag: string, step: number): Promise<TagRecord> {
    checkTag(tag);
    checkStep(step);
    return this.ranges.write(`changing the step of tag ${JSON.stringify(tag)}`, async (conn) => {
      const [results] = await this.send<
        [ResultSetHeader, (TagRowPacket & { read_only: number })[]]
      >(
        conn,
        `UPDATE ${this.table} SET step = ? WHERE biz_tag = ? AND @@global.read_only = 0; ${this.selectOne(", @@global.read_only AS read_only")}`,
        [step, tag, tag],
      );
      const row = results[1][0];
      if (!row) throw unknownTag(tag, this.where());
      if (results[0].affectedRows !== 1) throw new MysqlReadOnly("@@global.read_only is ON");
      return tagRecordOf(row);
    });
  }

  /**
   * In one transaction: locks the tag's row (`SELECT ... FOR UPDATE`), records its max id in the
   * deleted tags' table (keeping the higher one), deletes the row, commits; answers the row read
   * under the lock, so no range taken in between is missing from its max id, with the max id
   * recorded (the row's, or the higher one the tag was deleted with before: a re-create starts at
   * or above it). Sent at most once (see {@link giveBack}).
   */
  async deleteTag(tag: string): Promise<TagRecord | undefined> {
    checkTag(tag);
    return this.ranges.write(
      `deleting tag ${JSON.stringify(tag)}`,
      async (conn) => {
        const [locked] = await this.send<
          [ResultSetHeader, (TagRowPacket & { read_only: number })[]]
        >(
          conn,
          `START TRANSACTION; ${this.selectOne(", @@global.read_only AS read_only")} FOR UPDATE`,
          [tag],
        );
        const row = locked[1][0];
        if (!row) {
          await this.send(conn, "ROLLBACK");
          return undefined;
        }
        // Every error below drops the connection, which rolls the transaction back.
        if (Number(row.read_only) !== 0) throw new MysqlReadOnly("@@global.read_only is ON");
        const [changed] = await this.send<[ResultSetHeader, ResultSetHeader, DeletedRow[]]>(
          conn,
          `INSERT INTO ${this.deletedTable} (biz_tag, max_id) SELECT ?, ? FROM DUAL WHERE @@global.read_only = 0 ON DUPLICATE KEY UPDATE max_id = GREATEST(max_id, VALUES(max_id)); DELETE FROM ${this.table} WHERE biz_tag = ? AND @@global.read_only = 0; SELECT max_id FROM ${this.deletedTable} WHERE biz_tag = ?`,
          [tag, row.max_id, tag, tag],
        );
        if (changed[0].affectedRows < 1 || changed[1].affectedRows !== 1) {
          throw new MysqlReadOnly("@@global.read_only is ON");
        }
        await this.send(conn, "COMMIT");
        // A give-back onto a re-created row can leave it below the max id the tag was deleted with
        // before: the answer is the recorded (higher) one, where a re-create may start.
        const recorded = changed[2][0];
        return {
          ...tagRecordOf(row),
          maxId: recorded ? BigInt(recorded.max_id) : BigInt(row.max_id),
        };
      },
      (conn) => this.ensureDeletedTable(conn),
    );
  }

  /**
   * Checks, on the host in use, everything taking ranges needs, so that a wrong setting fails at
   * start rather than on every request: the user logs in, the database and the table (with Java
   * Leaf's columns) exist, the user may SELECT and UPDATE the table (a no-op
   * `UPDATE ... WHERE 1 = 0`: MySQL and MariaDB check the privilege even when no row matches, and
   * it changes nothing), and the server takes writes. Rejects with INVALID_CONFIG naming what to
   * fix (access, schema), or UNAVAILABLE when no listed host answers writable.
   */
  async checkAccess(): Promise<void> {
    await this.ranges.checkAccess([
      `SELECT biz_tag, max_id, step, description, update_time FROM ${this.table} WHERE 1 = 0`,
      `UPDATE ${this.table} SET max_id = max_id, step = step WHERE 1 = 0`,
    ]);
  }

  /**
   * The residue record of this database in a residue set (`leaf_alloc_residue`, one row), read on
   * the host in use; undefined when the set was never formed here.
   */
  async readResidue(): Promise<ResidueRecord | undefined> {
    return this.ranges.run("reading the residue record", (conn) => this.residue.read(conn));
  }

  /**
   * Writes the residue record when its version is `expectedVersion` (null: when there is none),
   * creating the table first when it is missing: one `UPDATE ... WHERE version = ?` (or `INSERT`),
   * sent at most once (see {@link giveBack}).
   */
  async writeResidue(next: ResidueRecord, expectedVersion: number | null): Promise<boolean> {
    checkResidueRecord(next, "next");
    checkExpectedVersion(expectedVersion);
    return this.ranges.write(
      "writing the residue record",
      (conn) => this.residue.write(conn, next, expectedVersion),
      (conn) => this.residue.ensure(conn),
    );
  }

  /** Counters: round trips, ranges taken, failovers, refusals, the host in use. */
  stats(): MysqlStoreStats {
    return this.ranges.stats();
  }

  /**
   * Closes every pool. Idempotent. Statements in flight get up to `queryTimeoutMs` to answer (a
   * give-back that answers in time is done); then the sockets still open are destroyed and close()
   * returns. mysql2's pool end waits for each connection's last statement, and one whose server
   * does not answer (SIGSTOPped, cut off) would hold it until the server answers, however long.
   * Nothing is sent again: a write without an answer stays as its call reported it (sent once,
   * outcome unknown; a range not answered is a gap).
   */
  async close(): Promise<void> {
    if (!this.ranges.close()) return;
    await this.sockets.endWithin(this.cluster.end(), this.queryTimeoutMs);
  }

  private selectOne(extra = ""): string {
    return `SELECT biz_tag, max_id, step, description, CAST(UNIX_TIMESTAMP(update_time) AS SIGNED) AS updated${extra} FROM ${this.table} WHERE biz_tag = ?`;
  }

  private where(): string {
    return `table ${this.tableName}${this.database ? ` of database ${this.database}` : ""}`;
  }

  /** mysql2's side of the host failover: the pools, MySQL's errors, its read_only flags. */
  private driver(): HostDriver<PoolConnection> {
    return {
      product: "MySQL",
      hostNames: this.hostNames,
      serverOption: STORE_FIXES.server,
      makeReadOnly: "SET GLOBAL read_only = ON",
      connect: async (index) => {
        const conn = await this.cluster.getConnection(nodeId(index));
        this.sockets.watch(conn);
        return conn;
      },
      release: (conn) => conn.release(),
      destroy: (conn) => conn.destroy(),
      execute: async (conn, sql) => {
        await this.send(conn, sql);
      },
      checkWritable: (conn) => this.checkWritable(conn),
      classify: (error) => {
        const info = classifyMysqlError(error);
        return { ...info, serverCode: info.errno };
      },
      toError: (error, doing, host) => mysqlError(error, { ...this.context(doing), host }),
      details: (info) => ({ mysql: info.kind, errno: info.serverCode }),
    };
  }

  /** Creates the deleted tags' table when it is missing (a table made by Java Leaf's script). */
  private async ensureDeletedTable(conn: PoolConnection): Promise<void> {
    try {
      await this.send(conn, `SELECT 1 FROM ${this.deletedTable} WHERE 1 = 0`);
    } catch (error) {
      if ((error as { errno?: number }).errno !== 1146) throw error;
      await this.send(conn, deletedTagsSchema(this.tableName));
    }
  }

  private async checkWritable(conn: PoolConnection): Promise<void> {
    const [rows] = await this.send<RowDataPacket[]>(
      conn,
      "SELECT @@global.read_only AS read_only, @@global.innodb_read_only AS innodb_read_only",
    );
    if (Number(rows[0]?.read_only) !== 0 || Number(rows[0]?.innodb_read_only) !== 0) {
      throw new MysqlReadOnly("the server is read-only");
    }
  }

  private async send<T>(conn: PoolConnection, sql: string, values?: unknown[]): Promise<[T]> {
    this.ranges.countRoundTrip();
    const [result] = await conn.query({ sql, values, timeout: this.queryTimeoutMs });
    return [result as T];
  }

  private context(what: string) {
    const table =
      this.database && !this.tableName.includes(".")
        ? `${this.database}.${this.tableName}`
        : this.tableName;
    return { component: COMPONENT, doing: what, table, fixes: STORE_FIXES };
  }
}

/**
 * Creates Java Leaf's `leaf_alloc` table (or `options.table`) when it does not exist, through a
 * short-lived store on the same options.
 */
export async function createSchema(options: MysqlSegmentStoreOptions): Promise<void> {
  const store = new MysqlSegmentStore({ ...options, connectionLimit: 1 });
  try {
    await store.createSchema();
  } finally {
    await store.close();
  }
}
