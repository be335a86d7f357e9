// The residue record of a database in a residue set (`ResidueSegmentStore` of @leaf/segment): one
// row of `leaf_alloc_residue`, read after every range the set's store takes, and written only with
// a compare-and-set on its version. Kept apart from the store, which runs these on its host.
import type { ResidueRecord } from "@leaf/segment";
import { type ResidueRow, residueMembersText, residueRecordOf } from "@leaf/segment/adapter";
import type pg from "pg";
import { quoteTable, residueSchema, residueTableName } from "./leaf-alloc-schema";

/** Sends one statement on a connection (the store's, which counts round trips). */
export type Send = (
  conn: pg.PoolClient,
  sql: string,
  values?: unknown[],
) => Promise<{ rows: unknown[]; rowCount: number | null }>;

/** PostgreSQL's undefined_table: the set was never formed in this database. */
const UNDEFINED_TABLE = "42P01";

/** The statements on the residue table of the tag table `tableName`. */
export class PostgresResidueTable {
  private readonly table: string;

  constructor(
    private readonly tableName: string,
    private readonly send: Send,
  ) {
    this.table = quoteTable(residueTableName(tableName));
  }

  /** The record, or undefined when there is none (no table: the set was never formed here). */
  async read(conn: pg.PoolClient): Promise<ResidueRecord | undefined> {
    try {
      const { rows } = await this.send(
        conn,
        // Every column (bigint comes as text): a table without the members column (not made by
        // this version of the store) is read as it is, and its record refused by the set's store.
        `SELECT * FROM ${this.table} WHERE id = 1`,
      );
      const row = rows[0] as ResidueRow | undefined;
      return row === undefined ? undefined : residueRecordOf(row);
    } catch (error) {
      if ((error as { code?: unknown }).code === UNDEFINED_TABLE) return undefined;
      throw error;
    }
  }

  /**
   * Creates the table when it is missing (looked up first, so that a user who may not create
   * tables writes a record in a table made by hand). Changes no row.
   */
  async ensure(conn: pg.PoolClient): Promise<void> {
    const { rows } = await this.send(conn, "SELECT to_regclass($1)::text AS name", [this.table]);
    const found = rows[0] as { name: string | null } | undefined;
    if (found?.name === null || found?.name === undefined) {
      await this.send(conn, residueSchema(this.tableName));
    }
  }

  /**
   * Writes `next` when the stored version is `expected` (null: when there is no row), in one
   * statement; true when written. A standby or a read-only server refuses the statement itself
   * (SQLSTATE 25006), and the store moves to the next host.
   */
  async write(conn: pg.PoolClient, next: ResidueRecord, expected: number | null): Promise<boolean> {
    const values = [
      next.setId,
      next.memberId,
      next.epoch,
      next.delta,
      next.remainder,
      next.state,
      String(next.version),
      residueMembersText(next),
    ];
    const result =
      expected === null
        ? await this.send(
            conn,
            `INSERT INTO ${this.table} (id, set_id, member_id, epoch, delta, remainder, state, version, members) VALUES (1, $1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING`,
            values,
          )
        : await this.send(
            conn,
            `UPDATE ${this.table} SET set_id = $1, member_id = $2, epoch = $3, delta = $4, remainder = $5, state = $6, version = $7, members = $8, update_time = CURRENT_TIMESTAMP WHERE id = 1 AND version = $9`,
            [...values, String(expected)],
          );
    return result.rowCount === 1;
  }
}
