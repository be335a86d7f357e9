// The PostgreSQL segment store: a leaf_alloc table on pg (node-postgres). A range is one statement,
// `UPDATE ... SET max_id = max_id + step ... RETURNING max_id, step`, so no other node's range can
// come between the write and the read (Java Leaf's DAO commits the UPDATE, then reads). Several
// hosts in failover order; never a range from a standby or a read-only server, none while two
// listed hosts are writable (a split brain) or from a host whose max id is behind. The host
// failover, the once-only writes and the range checks are @leaf/segment's HostedRanges, shared with
// the MySQL store; this file holds the SQL and pg's side of them.
import { SCHEMA_LOCK_SQL } from "@leaf/postgres-support";
import type { NewTag, ResidueRecord, SegmentRange, SegmentStore, TagRecord } from "@leaf/segment";
import {
  belowDeletedTag,
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
import type pg from "pg";
import {
  deletedTableName,
  deletedTagsSchema,
  leafAllocSchema,
  quoteTable,
} from "./leaf-alloc-schema";
import { classifyPostgresError, postgresError } from "./postgres-errors";
import { PostgresResidueTable } from "./postgres-residue";
import {
  hostPools,
  type PostgresSegmentStoreOptions,
  type PostgresStoreStats,
} from "./postgres-store-options";

export type { PostgresSegmentStoreOptions, PostgresStoreStats } from "./postgres-store-options";

/** A host that is a standby or refuses writes (`transaction_read_only`): move to the next. */
class PostgresReadOnly extends ReadOnlyHost {}

/**
 * The columns of a tag's record (of the row named `from`), as text where a JS number could round
 * them.
 */
function record(from = ""): string {
  const p = from === "" ? "" : `${from}.`;
  return `${p}biz_tag, ${p}max_id::text AS max_id, ${p}step, ${p}description, floor(extract(epoch FROM ${p}update_time))::bigint::text AS updated`;
}

const RECORD = record();

/**
 * A {@link SegmentStore} on a `leaf_alloc` table in PostgreSQL.
 *
 * Every value is a query parameter; `int8` columns are read as text (`max_id::text`) and become
 * bigint, whatever type parsers the application set on pg. With several hosts the store uses one
 * at a time and moves to the next when it fails or is read-only, staying there until that one
 * fails (no flapping back).
 */
export class PostgresSegmentStore implements SegmentStore {
  readonly kind = "postgres";
  private readonly pools: pg.Pool[];
  private readonly hostNames: string[];
  private readonly table: string;
  private readonly tableName: string;
  /** The deleted tags' table, quoted (see {@link deletedTableName}). */
  private readonly deletedTable: string;
  private readonly database: string;
  /** Host failover, once-only writes, range checks and counters (shared with other SQL stores). */
  private readonly ranges: HostedRanges<pg.PoolClient>;
  /** The residue record, when the database is in a residue set (`leaf_alloc_residue`). */
  private readonly residue: PostgresResidueTable;

  constructor(options: PostgresSegmentStoreOptions) {
    const hosts = hostPools(options);
    this.pools = hosts.pools;
    this.hostNames = hosts.hostNames;
    this.database = hosts.database;
    this.tableName = hosts.tableName;
    this.table = quoteTable(hosts.tableName);
    this.deletedTable = quoteTable(deletedTableName(hosts.tableName));
    this.ranges = new HostedRanges({
      driver: this.driver(),
      where: this.where(),
      name: "the PostgreSQL segment store",
    });
    this.residue = new PostgresResidueTable(hosts.tableName, (conn, sql, values) =>
      this.sendResult(conn, sql, values),
    );
  }

  /**
   * Creates the `leaf_alloc` table and the deleted tags' table (`leaf_alloc_deleted`) when they do
   * not exist, on a writable host. One transaction behind an advisory lock: processes creating them
   * at once (servers, a server's worker processes) wait for each other rather than fail.
   */
  async createSchema(): Promise<void> {
    await this.ranges.createSchema([
      "BEGIN",
      SCHEMA_LOCK_SQL,
      leafAllocSchema(this.tableName),
      deletedTagsSchema(this.tableName),
      "COMMIT",
    ]);
  }

  async listTags(): Promise<string[]> {
    const rows = await this.ranges.run("listing tags", (conn) =>
      this.send<{ biz_tag: string }>(conn, `SELECT biz_tag FROM ${this.table}`),
    );
    return rows.map((row) => String(row.biz_tag));
  }

  async describeTags(): Promise<TagRecord[]> {
    const rows = await this.ranges.run("describing tags", (conn) =>
      this.send<TagRow>(conn, `SELECT ${RECORD} FROM ${this.table} ORDER BY biz_tag COLLATE "C"`),
    );
    return rows.map(tagRecordOf);
  }

  /**
   * Takes a range in one statement: `UPDATE ... SET max_id = max_id + step WHERE biz_tag = $1 AND
   * step >= 1 AND max_id >= $2 AND max_id <= 2^63 - 1 - step RETURNING max_id, step`. The row lock
   * and the new max id come from the same statement, so the range is exactly the one this
   * statement made. The row changes only when its step is at least 1 and its max id is at least
   * the end of every range this store handed out before the call and the caller's `floor`; a standby or a read-only server
   * refuses the UPDATE itself (SQLSTATE 25006) and the next host is tried. When no row comes back,
   * a second statement reads the row to say why (refused, exhausted, unknown); the refusals and the
   * split-brain check are `HostedRanges.takeRange`'s.
   */
  async takeRange(tag: string, step?: number, floor?: bigint): Promise<SegmentRange> {
    return this.ranges.takeRange(
      tag,
      step,
      async (conn, floor) => {
        const [sql, values] =
          step === undefined
            ? [
                `UPDATE ${this.table} SET max_id = max_id + step, update_time = CURRENT_TIMESTAMP WHERE biz_tag = $1 AND step >= 1 AND max_id >= $2 AND max_id <= ${MAX_ID} - step RETURNING max_id::text AS max_id, step`,
                [tag, floor.toString()],
              ]
            : [
                `UPDATE ${this.table} SET max_id = max_id + $3, update_time = CURRENT_TIMESTAMP WHERE biz_tag = $1 AND step >= 1 AND max_id >= $2 AND max_id <= $4 RETURNING max_id::text AS max_id, step`,
                [tag, floor.toString(), String(step), (MAX_ID - BigInt(step)).toString()],
              ];
        const [moved] = await this.send<{ max_id: string; step: number }>(conn, sql, values);
        if (moved) return { taken: { maxId: BigInt(moved.max_id), tableStep: Number(moved.step) } };
        const [row] = await this.send<{ max_id: string; step: unknown }>(
          conn,
          `SELECT max_id::text AS max_id, step FROM ${this.table} WHERE biz_tag = $1`,
          [tag],
        );
        if (!row) throw unknownTag(tag, this.where());
        return { unchanged: { maxId: BigInt(row.max_id), step: row.step } };
      },
      floor,
    );
  }

  /**
   * Gives back `[from, end)` (see {@link SegmentStore.giveBack}): `UPDATE ... SET max_id = from
   * WHERE biz_tag = $2 AND max_id = end`, one statement, so the compare and the set are atomic
   * against every process taking ranges from the row. A read-only host is skipped as for ranges.
   * The UPDATE is sent at most once: when its answer does not come (a timeout, a lost connection)
   * the call rejects with UNAVAILABLE (`details.reason` "outcome-unknown") and the ids are a gap.
   * Sent again, a copy still queued on the server (behind a row lock) could run after another
   * process took `[from, end)` and find the max id back at `end`, and give back ids that process
   * holds.
   */
  async giveBack(tag: string, from: bigint, end: bigint): Promise<boolean> {
    return this.ranges.giveBack(tag, from, end, async (conn) => {
      const result = await this.sendResult(
        conn,
        `UPDATE ${this.table} SET max_id = $1, update_time = CURRENT_TIMESTAMP WHERE biz_tag = $2 AND max_id = $3`,
        [from.toString(), tag, end.toString()],
      );
      return result.rowCount === 1;
    });
  }

  /**
   * In one transaction: inserts the tag's row (a duplicate key: ALREADY_EXISTS), then reads the max
   * id it had when it was last deleted with a locking read (`FOR SHARE`, a new statement, so it
   * sees a delete that committed while the insert waited for it): below it, the transaction is
   * rolled back and the call rejects with ALREADY_EXISTS, `details.reason` "deleted". Sent at most
   * once (see {@link giveBack}).
   */
  async createTag(input: NewTag): Promise<TagRecord> {
    const tag = normalizeNewTag(input);
    return this.ranges.write(
      `creating tag ${JSON.stringify(tag.tag)}`,
      async (conn) => {
        // Every error below drops the connection, which rolls the transaction back.
        await this.send(conn, "BEGIN");
        let created: TagRow | undefined;
        try {
          [created] = await this.send<TagRow>(
            conn,
            `INSERT INTO ${this.table} (biz_tag, max_id, step, description) VALUES ($1, $2, $3, $4) RETURNING ${RECORD}`,
            [tag.tag, tag.startId.toString(), tag.step, tag.description],
          );
        } catch (error) {
          if ((error as { code?: unknown }).code === "23505")
            throw tagExists(tag.tag, this.where());
          throw error;
        }
        const [deleted] = await this.send<{ max_id: string }>(
          conn,
          `SELECT max_id::text AS max_id FROM ${this.deletedTable} WHERE biz_tag = $1 FOR SHARE`,
          [tag.tag],
        );
        if (deleted && BigInt(deleted.max_id) > tag.startId) {
          throw belowDeletedTag(tag.tag, tag.startId, BigInt(deleted.max_id), this.where());
        }
        await this.send(conn, "COMMIT");
        return tagRecordOf(created!);
      },
      (conn) => this.ensureDeletedTable(conn),
    );
  }

  /** One statement (`UPDATE ... RETURNING`), sent at most once (see {@link giveBack}). */
  async updateStep(tag: string, step: number): Promise<TagRecord> {
    checkTag(tag);
    checkStep(step);
    return this.ranges.write(`changing the step of tag ${JSON.stringify(tag)}`, async (conn) => {
      const [row] = await this.send<TagRow>(
        conn,
        `UPDATE ${this.table} SET step = $1, update_time = CURRENT_TIMESTAMP WHERE biz_tag = $2 RETURNING ${RECORD}`,
        [step, tag],
      );
      if (!row) throw unknownTag(tag, this.where());
      return tagRecordOf(row);
    });
  }

  /**
   * One statement: `DELETE ... RETURNING` the row (after any range in flight on it committed: the
   * DELETE waits for its lock and deletes the newest version), and in the same statement records
   * its max id in the deleted tags' table, keeping the higher one. Answers the deleted row with the
   * max id recorded (the row's, or the higher one the tag was deleted with before: a re-create
   * starts at or above it). Sent at most once (see {@link giveBack}).
   */
  async deleteTag(tag: string): Promise<TagRecord | undefined> {
    checkTag(tag);
    return this.ranges.write(
      `deleting tag ${JSON.stringify(tag)}`,
      async (conn) => {
        const [row] = await this.send<TagRow & { recorded: string }>(
          conn,
          `WITH gone AS (DELETE FROM ${this.table} WHERE biz_tag = $1 RETURNING biz_tag, max_id, step, description, update_time), ` +
            `recorded AS (INSERT INTO ${this.deletedTable} AS old (biz_tag, max_id) SELECT biz_tag, max_id FROM gone ` +
            "ON CONFLICT (biz_tag) DO UPDATE SET max_id = GREATEST(old.max_id, EXCLUDED.max_id), deleted_at = CURRENT_TIMESTAMP RETURNING max_id) " +
            `SELECT ${record("gone")}, recorded.max_id::text AS recorded FROM gone, recorded`,
          [tag],
        );
        if (!row) return undefined;
        return { ...tagRecordOf(row), maxId: BigInt(row.recorded) };
      },
      (conn) => this.ensureDeletedTable(conn),
    );
  }

  /**
   * Checks, on the host in use, everything taking ranges needs, so that a wrong setting fails at
   * start rather than on every request: the user logs in, the database and the table (with its
   * columns) exist, the user may SELECT and UPDATE the table (a no-op `UPDATE ... WHERE false`:
   * PostgreSQL checks privileges before it looks at rows, and it changes nothing), and the server
   * takes writes (not a standby, not read-only: on one, the UPDATE itself is refused). Rejects with
   * INVALID_CONFIG naming what to fix (access, schema), or UNAVAILABLE when no listed host answers
   * writable.
   */
  async checkAccess(): Promise<void> {
    await this.ranges.checkAccess([
      `SELECT biz_tag, max_id, step, description, update_time FROM ${this.table} WHERE false`,
      `UPDATE ${this.table} SET max_id = max_id, step = step WHERE false`,
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
   * creating the table first when it is missing: one `UPDATE ... WHERE version = $8` (or `INSERT
   * ... ON CONFLICT DO NOTHING`), sent at most once (see {@link giveBack}).
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
  stats(): PostgresStoreStats {
    return this.ranges.stats();
  }

  /** Closes every pool. Idempotent. */
  async close(): Promise<void> {
    if (!this.ranges.close()) return;
    await Promise.all(this.pools.map((pool) => pool.end().catch(() => {})));
  }

  private where(): string {
    return `table ${this.tableName} of database ${this.database}`;
  }

  /**
   * pg's side of the host failover: the pools, PostgreSQL's errors, its standby and read-only
   * flags.
   */
  private driver(): HostDriver<pg.PoolClient> {
    return {
      product: "PostgreSQL",
      hostNames: this.hostNames,
      serverOption: STORE_FIXES.server,
      makeReadOnly:
        "ALTER SYSTEM SET default_transaction_read_only = on and SELECT pg_reload_conf(), or make them standbys",
      connect: (index) => this.pools[index]!.connect(),
      release: (conn) => conn.release(),
      // pg drops a client released with an error (and ends a statement still running on it).
      destroy: (conn) => conn.release(true),
      execute: async (conn, sql) => {
        await this.send(conn, sql);
      },
      checkWritable: (conn) => this.checkWritable(conn),
      classify: classifyPostgresError,
      toError: (error, doing, host) =>
        postgresError(error, {
          doing,
          host,
          table: `${this.database}.${this.tableName}`,
          fixes: STORE_FIXES,
        }),
      details: (info) => ({ postgres: info.kind, sqlState: info.serverCode }),
    };
  }

  /** Creates the deleted tags' table when it is missing (a table made by an older script). */
  private async ensureDeletedTable(conn: pg.PoolClient): Promise<void> {
    const [found] = await this.send<{ name: string | null }>(
      conn,
      "SELECT to_regclass($1)::text AS name",
      [this.deletedTable],
    );
    if (found?.name === null || found?.name === undefined) {
      await this.send(conn, deletedTagsSchema(this.tableName));
    }
  }

  /** Throws {@link PostgresReadOnly} unless the server is a primary taking writes. */
  private async checkWritable(conn: pg.PoolClient): Promise<void> {
    const [row] = await this.send<{ recovery: boolean; read_only: string }>(
      conn,
      "SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS read_only",
    );
    if (row?.recovery !== false)
      throw new PostgresReadOnly("the server is a standby (in recovery)");
    if (row.read_only !== "off") throw new PostgresReadOnly("transaction_read_only is on");
  }

  private async send<T>(conn: pg.PoolClient, text: string, values?: unknown[]): Promise<T[]> {
    return (await this.sendResult(conn, text, values)).rows as T[];
  }

  private sendResult(conn: pg.PoolClient, text: string, values?: unknown[]) {
    this.ranges.countRoundTrip();
    return conn.query({ text, values });
  }
}

/**
 * Creates the `leaf_alloc` table (or `options.table`) and its deleted tags' table when they do not
 * exist, through a short-lived store on the same options.
 */
export async function createSchema(options: PostgresSegmentStoreOptions): Promise<void> {
  const store = new PostgresSegmentStore({ ...options, connectionLimit: 1 });
  try {
    await store.createSchema();
  } finally {
    await store.close();
  }
}
