// The MySQL segment store: Java Leaf's leaf_alloc table on mysql2. A range is Leaf's
// update-then-select in one transaction, sent as one round trip; several hosts in failover order,
// never a range from a read-only server (a replica), whatever the user's privileges, and none while
// more than one listed host is writable (a split brain) or from a host whose max id is behind.
// A change that sets a value (a give-back, a new tag, a step, a delete) is sent at most once: a
// copy the server still holds could run after other changes and undo them. Host failover, the
// writability and split-brain checks, the range transaction and the once-only writes are one class
// because they share its pool cluster and counters.
import { ErrorCodes, LeafError } from "@leaf/core";
import {
  classifyMysqlError,
  type MysqlErrorInfo,
  type MysqlFixes,
  mysqlError,
} from "@leaf/mysql-support";
import type { NewTag, SegmentRange, SegmentStore, TagRecord } from "@leaf/segment";
import type { PoolCluster, PoolConnection, ResultSetHeader, RowDataPacket } from "mysql2/promise";
import {
  deletedTableName,
  deletedTagsSchema,
  leafAllocSchema,
  quoteTable,
} from "./leaf-alloc-schema";
import {
  hostCluster,
  type MysqlSegmentStoreOptions,
  type MysqlStoreStats,
  nodeId,
} from "./mysql-store-options";

export type { MysqlSegmentStoreOptions, MysqlStoreStats } from "./mysql-store-options";

import {
  badStoredMaxId,
  badStoredStep,
  belowDeletedTag,
  COMPONENT,
  checkStep,
  checkTag,
  closedError,
  MAX_ID,
  maxIdMovedBack,
  normalizeNewTag,
  RangeFloors,
  rangeOverflow,
  tagExists,
  unknownTag,
} from "@leaf/segment/adapter";

/** How an operator fixes the store's configuration, in its option names. */
const FIXES: MysqlFixes = {
  credentials: "the user and password (the url, or the user / password options)",
  database: "the database (the url's path, or the database option)",
  createTable: "createSchema(), or sql/leaf_alloc.sql and sql/leaf_alloc_deleted.sql",
  server: "the url (or hosts) option",
};

/**
 * Raised inside a host attempt when the server is read-only: move to the next host. It carries the
 * error MySQL itself gives a write on a read-only server, so it is classified the same way.
 */
class ReadOnlyHost extends Error {
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

interface TagRow extends RowDataPacket {
  biz_tag: string;
  max_id: string;
  step: number;
  description: string | null;
  updated: string | number | null;
}

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
  private current = 0;
  private closed = false;
  private readonly counters = {
    roundTrips: 0,
    rangesTaken: 0,
    failovers: 0,
    splitBrainRefusals: 0,
    rangeRefusals: 0,
    givenBack: 0,
    giveBacksRefused: 0,
    writesUnanswered: 0,
  };
  /** Ends of the ranges this store handed out, per tag, with the host each came from. */
  private readonly floors = new RangeFloors();

  constructor(options: MysqlSegmentStoreOptions) {
    const hosts = hostCluster(options);
    this.cluster = hosts.cluster;
    this.hostNames = hosts.hostNames;
    this.database = hosts.database;
    this.tableName = hosts.tableName;
    this.table = quoteTable(hosts.tableName);
    this.deletedTable = quoteTable(deletedTableName(hosts.tableName));
    this.queryTimeoutMs = hosts.queryTimeoutMs;
  }

  /**
   * Creates the `leaf_alloc` table (Java Leaf's, column for column) and the deleted tags' table
   * (`leaf_alloc_deleted`, which Java Leaf never reads) when they do not exist.
   */
  async createSchema(): Promise<void> {
    await this.withHost("creating the table", async (conn) => {
      await this.checkWritable(conn);
      await this.send(conn, leafAllocSchema(this.tableName));
      await this.send(conn, deletedTagsSchema(this.tableName));
    });
  }

  async listTags(): Promise<string[]> {
    const rows = await this.withHost("listing tags", async (conn) => {
      const [result] = await this.send<RowDataPacket[]>(conn, `SELECT biz_tag FROM ${this.table}`);
      return result;
    });
    return rows.map((row) => String(row.biz_tag));
  }

  async describeTags(): Promise<TagRecord[]> {
    const rows = await this.withHost("describing tags", async (conn) => {
      const [result] = await this.send<TagRow[]>(
        conn,
        `SELECT biz_tag, max_id, step, description, CAST(UNIX_TIMESTAMP(update_time) AS SIGNED) AS updated FROM ${this.table} ORDER BY biz_tag`,
      );
      return result;
    });
    return rows.map(toRecord);
  }

  /**
   * Takes a range on the host in use. The `UPDATE` changes the row only when the server is
   * writable, the stored step is at least 1 and the max id is at least the end of every range this
   * store handed out before the call (so a max id moved back, or a failover to a server that lost
   * writes, is refused without advancing it further). With several hosts, every other listed host
   * is then asked whether it is writable: if one is, the range is discarded (a gap) and the call
   * rejects with UNAVAILABLE, `details.reason` "split-brain".
   *
   * Unlike the other writes, a range is tried again on a timeout or a lost connection: its UPDATE
   * only adds to the max id, so a copy the server still runs later moves the max id past a range
   * nobody is answered (a gap); the range answered comes from the copy whose result was read.
   */
  async takeRange(tag: string, step?: number): Promise<SegmentRange> {
    checkTag(tag);
    if (step !== undefined) checkStep(step);
    // Ranges handed out before this call were committed before its UPDATE runs, so a healthy row is
    // at or above their ends; ranges of calls still in flight may end higher in any order.
    const floor = this.floors.get(tag);
    const { range, host } = await this.withHost(
      `taking a range of tag ${JSON.stringify(tag)}`,
      async (conn, host) => {
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
        const changed = results[1].affectedRows;
        const row = results[2][0];
        if (!row) throw unknownTag(tag, this.where());
        const maxId = BigInt(row.max_id);
        const tableStep = Number(row.step);
        if (changed !== 1) {
          if (Number(row.read_only) !== 0) throw new ReadOnlyHost("@@global.read_only is ON");
          const refusal = this.refusal(tag, row, floor, host);
          if (refusal) {
            this.counters.rangeRefusals++;
            throw refusal;
          }
          const used = step ?? tableStep;
          if (maxId > MAX_ID - BigInt(used)) throw rangeOverflow(tag, maxId, used);
          throw new Error(`the row of tag ${JSON.stringify(tag)} did not change (${changed} rows)`);
        }
        const used = step ?? tableStep;
        return {
          range: { tag, start: maxId - BigInt(used), end: maxId, step: used, tableStep },
          host,
        };
      },
    );
    if (this.hostNames.length > 1) {
      const writable = await this.otherWritableHosts(host);
      if (writable.length > 0) {
        this.counters.splitBrainRefusals++;
        const hosts = [this.hostNames[host]!, ...writable];
        throw new LeafError({
          component: COMPONENT,
          code: ErrorCodes.UNAVAILABLE,
          message:
            `split brain: ${hosts.length} listed MySQL hosts are writable (${hosts.join(", ")}); refused range ` +
            `[${range.start}, ${range.end}) of tag ${JSON.stringify(tag)} taken on ${hosts[0]} (a gap, never handed out). ` +
            "Only the primary may be writable: make the others read-only (SET GLOBAL read_only = ON) or take them " +
            "out of the host list; ranges resume once one host is writable",
          details: { reason: "split-brain", tag, writableHosts: hosts },
        });
      }
    }
    this.floors.raise(tag, range.end, this.hostNames[host]!, range.start);
    this.counters.rangesTaken++;
    return range;
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
    if (this.floors.checkGiveBack(tag, from, end) === "moved-on") {
      this.counters.giveBacksRefused++;
      return false;
    }
    const given = await this.withHost(
      `giving back ids [${from}, ${end}) of tag ${JSON.stringify(tag)}`,
      async (conn) => {
        const [results] = await this.send<[ResultSetHeader, RowDataPacket[]]>(
          conn,
          `UPDATE ${this.table} SET max_id = ? WHERE biz_tag = ? AND max_id = ? AND @@global.read_only = 0; SELECT @@global.read_only AS read_only`,
          [from, tag, end],
        );
        if (results[0].affectedRows === 1) return true;
        if (Number(results[1][0]?.read_only) !== 0)
          throw new ReadOnlyHost("@@global.read_only is ON");
        return false;
      },
      (conn) => this.probe(conn),
    );
    if (given) {
      this.floors.lower(tag, from);
      this.counters.givenBack++;
    } else {
      this.counters.giveBacksRefused++;
    }
    return given;
  }

  /**
   * Inserts the tag's row and, in the same transaction, reads the max id it had when it was last
   * deleted (a locking read, so a delete committing meanwhile is seen): below it, the insert is
   * rolled back and the call rejects with ALREADY_EXISTS, `details.reason` "deleted". Sent at most
   * once (see {@link giveBack}).
   */
  async createTag(input: NewTag): Promise<TagRecord> {
    const tag = normalizeNewTag(input);
    return this.withHost(
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
        if (results[1].affectedRows !== 1) throw new ReadOnlyHost("@@global.read_only is ON");
        const deleted = results[2][0];
        if (deleted && BigInt(deleted.max_id) > tag.startId) {
          throw belowDeletedTag(tag.tag, tag.startId, BigInt(deleted.max_id), this.where());
        }
        const [done] = await this.send<[ResultSetHeader, TagRow[]]>(
          conn,
          `COMMIT; ${this.selectOne()}`,
          [tag.tag],
        );
        return toRecord(done[1][0]!);
      },
      (conn) => this.ensureDeletedTable(conn),
    );
  }

  /** Sent at most once (see {@link giveBack}). */
  async updateStep(tag: string, step: number): Promise<TagRecord> {
    checkTag(tag);
    checkStep(step);
    return this.withHost(
      `changing the step of tag ${JSON.stringify(tag)}`,
      async (conn) => {
        const [results] = await this.send<[ResultSetHeader, (TagRow & { read_only: number })[]]>(
          conn,
          `UPDATE ${this.table} SET step = ? WHERE biz_tag = ? AND @@global.read_only = 0; ${this.selectOne(", @@global.read_only AS read_only")}`,
          [step, tag, tag],
        );
        const row = results[1][0];
        if (!row) throw unknownTag(tag, this.where());
        if (results[0].affectedRows !== 1) throw new ReadOnlyHost("@@global.read_only is ON");
        return toRecord(row);
      },
      (conn) => this.probe(conn),
    );
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
    return this.withHost(
      `deleting tag ${JSON.stringify(tag)}`,
      async (conn) => {
        const [locked] = await this.send<[ResultSetHeader, (TagRow & { read_only: number })[]]>(
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
        if (Number(row.read_only) !== 0) throw new ReadOnlyHost("@@global.read_only is ON");
        const [changed] = await this.send<[ResultSetHeader, ResultSetHeader, DeletedRow[]]>(
          conn,
          `INSERT INTO ${this.deletedTable} (biz_tag, max_id) SELECT ?, ? FROM DUAL WHERE @@global.read_only = 0 ON DUPLICATE KEY UPDATE max_id = GREATEST(max_id, VALUES(max_id)); DELETE FROM ${this.table} WHERE biz_tag = ? AND @@global.read_only = 0; SELECT max_id FROM ${this.deletedTable} WHERE biz_tag = ?`,
          [tag, row.max_id, tag, tag],
        );
        if (changed[0].affectedRows < 1 || changed[1].affectedRows !== 1) {
          throw new ReadOnlyHost("@@global.read_only is ON");
        }
        await this.send(conn, "COMMIT");
        // A give-back onto a re-created row can leave it below the max id the tag was deleted with
        // before: the answer is the recorded (higher) one, where a re-create may start.
        const recorded = changed[2][0];
        return {
          ...toRecord(row),
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
    await this.withHost("checking access to the table", async (conn) => {
      await this.send(
        conn,
        `SELECT biz_tag, max_id, step, description, update_time FROM ${this.table} WHERE 1 = 0; UPDATE ${this.table} SET max_id = max_id, step = step WHERE 1 = 0`,
      );
      await this.checkWritable(conn);
    });
  }

  /** Counters: round trips, ranges taken, failovers, refusals, the host in use. */
  stats(): MysqlStoreStats {
    return { ...this.counters, currentHost: this.current, hosts: [...this.hostNames] };
  }

  /** Closes every pool. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.cluster.end().catch(() => {});
  }

  private selectOne(extra = ""): string {
    return `SELECT biz_tag, max_id, step, description, CAST(UNIX_TIMESTAMP(update_time) AS SIGNED) AS updated${extra} FROM ${this.table} WHERE biz_tag = ?`;
  }

  private where(): string {
    return `table ${this.tableName}${this.database ? ` of database ${this.database}` : ""}`;
  }

  /** Why the row of `tag` on `host` gives no range (the UPDATE matched nothing), if it is bad. */
  private refusal(tag: string, row: RangeRow, floor: bigint, host: number): LeafError | undefined {
    const where = `${this.where()} on ${this.hostNames[host]}`;
    const maxId = BigInt(row.max_id);
    if (!(Number(row.step) >= 1)) return badStoredStep(tag, row.step, where);
    if (maxId < 0n) return badStoredMaxId(tag, maxId, where);
    if (maxId < floor) {
      const from = this.floors.source(tag);
      const name = this.hostNames[host]!;
      return maxIdMovedBack(
        tag,
        maxId,
        floor,
        where,
        from === undefined || from === name ? {} : { stale: { host: name, from } },
      );
    }
    return undefined;
  }

  /**
   * The listed hosts other than `used` that answer as writable now (read_only and innodb_read_only
   * off). A host that cannot be reached within the timeouts is not counted: this store cannot tell
   * whether others reach it (a network partition needs the database's own fencing).
   */
  private async otherWritableHosts(used: number): Promise<string[]> {
    const answers = await Promise.all(
      this.hostNames.map(async (name, index) => {
        if (index === used) return false;
        let conn: PoolConnection;
        try {
          conn = await this.cluster.getConnection(nodeId(index));
        } catch {
          return false;
        }
        try {
          const [rows] = await this.send<RowDataPacket[]>(
            conn,
            "SELECT @@global.read_only AS read_only, @@global.innodb_read_only AS innodb_read_only",
          );
          conn.release();
          return Number(rows[0]?.read_only) === 0 && Number(rows[0]?.innodb_read_only) === 0
            ? name
            : false;
        } catch {
          conn.destroy();
          return false;
        }
      }),
    );
    return answers.filter((name): name is string => name !== false);
  }

  /** A round trip that changes nothing: the connection answers before a once-only write is sent. */
  private async probe(conn: PoolConnection): Promise<void> {
    await this.send(conn, "SELECT 1");
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
      throw new ReadOnlyHost("the server is read-only");
    }
  }

  private async send<T>(conn: PoolConnection, sql: string, values?: unknown[]): Promise<[T]> {
    this.counters.roundTrips++;
    const [result] = await conn.query({ sql, values, timeout: this.queryTimeoutMs });
    return [result as T];
  }

  /**
   * Runs `body` on a connection to the host in use; on a connection failure, a timeout or a
   * read-only server, moves to the next host (a lone host gets a second try, for a pooled
   * connection the server dropped). LeafErrors from `body` (unknown tag, exists, overflow),
   * configuration errors (access denied, missing database, table or column: INVALID_CONFIG) and SQL
   * errors about the statement itself are final. All hosts failing gives UNAVAILABLE, each host
   * named once with what it answered.
   *
   * With `once` (a write that sets a value), `once` runs first on the connection (statements that
   * change nothing, tried again as above) and `body` at most once: once it has sent a statement,
   * any failure but a read-only answer is final, and one without an answer from the server is
   * UNAVAILABLE with `details.reason` "outcome-unknown" (the statement may still run there). The
   * connection is dropped on any failure, which rolls back a transaction `body` left open.
   */
  private async withHost<T>(
    what: string,
    body: (conn: PoolConnection, host: number) => Promise<T>,
    once?: (conn: PoolConnection) => Promise<void>,
  ): Promise<T> {
    if (this.closed) throw closedError("the MySQL segment store");
    const n = this.hostNames.length;
    const attempts = n === 1 ? 2 : n;
    const failures = new Map<string, { error: unknown; info: MysqlErrorInfo }>();
    for (let i = 0; i < attempts; i++) {
      const index = (this.current + i) % n;
      let conn: PoolConnection;
      try {
        conn = await this.cluster.getConnection(nodeId(index));
      } catch (error) {
        if (this.closed) throw closedError("the MySQL segment store");
        failures.set(this.hostNames[index]!, this.failure(error, what, index));
        continue;
      }
      let sent = false;
      try {
        if (once) {
          await once(conn);
          sent = true;
        }
        const result = await body(conn, index);
        conn.release();
        if (index !== this.current) {
          this.current = index;
          this.counters.failovers++;
        }
        return result;
      } catch (error) {
        // A LeafError or a read-only answer comes after every statement ran: the connection is
        // clean. A failed statement, or a once-only write's refusal, may leave a transaction open:
        // that connection is dropped.
        if (!sent && (error instanceof LeafError || error instanceof ReadOnlyHost)) conn.release();
        else conn.destroy();
        if (error instanceof LeafError) throw error;
        if (sent && !(error instanceof ReadOnlyHost)) throw this.unanswered(error, what, index);
        failures.set(this.hostNames[index]!, this.failure(error, what, index));
      }
    }
    const all = [...failures];
    // A configuration error (access denied, missing database or table) on some host is what the
    // operator must fix; one host alone says what is wrong (unreachable, read-only) and what to do.
    const config = all.find(([, f]) => f.info.kind === "access" || f.info.kind === "schema");
    if (config || all.length === 1) {
      const [host, { error }] = config ?? all[0]!;
      throw mysqlError(error, { ...this.context(what), host });
    }
    const seen = all.map(([host, f]) => `${host}: ${f.info.kind} (${f.info.text})`);
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `no writable MySQL host answered while ${what} (${seen.join("; ")}); check that the primary is up and not read-only, and that ${FIXES.server} lists it`,
      details: {
        hosts: this.hostNames,
        failures: seen,
        unreachable: all.every(([, f]) => f.info.kind === "unreachable"),
      },
      cause: all[all.length - 1]![1].error,
    });
  }

  /**
   * The final error of a once-only write that failed after it was sent: the server's own error
   * when it refused the statement (nothing was changed), otherwise "outcome-unknown": no answer,
   * or the statement interrupted on the server (KILL QUERY, KILL CONNECTION, a time limit), which
   * may come after a commit the client never heard of.
   */
  private unanswered(error: unknown, what: string, index: number): LeafError {
    const host = this.hostNames[index]!;
    const info = classifyMysqlError(error);
    const interrupted = info.kind === "interrupted";
    if (info.kind !== "unreachable" && !interrupted && info.errno !== undefined) {
      return mysqlError(error, { ...this.context(what), host });
    }
    this.counters.writesUnanswered++;
    const happened = interrupted
      ? `MySQL host ${host} interrupted the statement while ${what} (${info.text}, ${info.errno ?? info.code}): it was sent and may have taken effect`
      : `no answer from MySQL host ${host} while ${what} (${info.text}): the statement was sent and may still run on the server (queued behind a row lock, say)`;
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message:
        `${happened}, so it is not sent again: run twice, it ` +
        "could undo a change made in between. Whether it took effect shows in the table once the server " +
        "answers; ids of a give-back that failed are a gap, never handed out",
      details: { reason: "outcome-unknown", host, mysql: info.kind, errno: info.errno },
      cause: error,
    });
  }

  /**
   * Classifies a host's failure; throws when it is final (a statement the server refuses, or a
   * configuration error with one host), returns it when the next host may do better (with several
   * hosts, one may lack the grants or the table that the primary has).
   */
  private failure(
    error: unknown,
    what: string,
    index: number,
  ): { error: unknown; info: MysqlErrorInfo } {
    const info = classifyMysqlError(error);
    const config = info.kind === "access" || info.kind === "schema";
    const final =
      (config && this.hostNames.length === 1) || (info.kind === "statement" && !info.transient);
    if (final) throw mysqlError(error, { ...this.context(what), host: this.hostNames[index] });
    return { error, info };
  }

  private context(what: string) {
    const table =
      this.database && !this.tableName.includes(".")
        ? `${this.database}.${this.tableName}`
        : this.tableName;
    return { component: COMPONENT, doing: what, table, fixes: FIXES };
  }
}

function toRecord(row: TagRow): TagRecord {
  const updated =
    row.updated === null || row.updated === undefined ? null : Number(row.updated) * 1000;
  return {
    tag: String(row.biz_tag),
    maxId: BigInt(row.max_id),
    step: Number(row.step),
    description: row.description ?? null,
    updatedAt: updated !== null && Number.isFinite(updated) ? updated : null,
  };
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
