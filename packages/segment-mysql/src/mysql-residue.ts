// The residue record of a database in a residue set (`ResidueSegmentStore` of @leaf/segment): one
// row of `leaf_alloc_residue`, read after every range the set's store takes, and written only with
// a compare-and-set on its version. Kept apart from the store, which runs these on its host.
import type { ResidueRecord } from "@leaf/segment";
import { type ResidueRow, residueMembersText, residueRecordOf } from "@leaf/segment/adapter";
import type { PoolConnection, ResultSetHeader, RowDataPacket } from "mysql2/promise";
import { quoteTable, residueSchema, residueTableName } from "./leaf-alloc-schema";

/** Sends one statement on a connection (the store's, which counts round trips). */
export type Send = <T>(conn: PoolConnection, sql: string, values?: unknown[]) => Promise<[T]>;

/** The statements on the residue table of the tag table `tableName`. */
export class MysqlResidueTable {
  private readonly table: string;

  constructor(
    private readonly tableName: string,
    private readonly send: Send,
    /** Thrown when the server answered that it takes no writes. */
    private readonly readOnly: () => Error,
  ) {
    this.table = quoteTable(residueTableName(tableName));
  }

  /** The record, or undefined when there is none (no table: the set was never formed here). */
  async read(conn: PoolConnection): Promise<ResidueRecord | undefined> {
    try {
      const [rows] = await this.send<(ResidueRow & RowDataPacket)[]>(
        conn,
        // Every column: a table without the members column (not made by this version of the
        // store) is read as it is, and its record refused by the residue set's store.
        `SELECT * FROM ${this.table} WHERE id = 1`,
      );
      return rows[0] === undefined ? undefined : residueRecordOf(rows[0]);
    } catch (error) {
      if ((error as { errno?: number }).errno === 1146) return undefined;
      throw error;
    }
  }

  /** Creates the table when it is missing. Changes no row. */
  async ensure(conn: PoolConnection): Promise<void> {
    await this.send(conn, residueSchema(this.tableName));
  }

  /**
   * Writes `next` when the stored version is `expected` (null: when there is no row), in one
   * statement on a writable server; true when written.
   */
  async write(
    conn: PoolConnection,
    next: ResidueRecord,
    expected: number | null,
  ): Promise<boolean> {
    const values = [
      next.setId,
      next.memberId,
      next.epoch,
      next.delta,
      next.remainder,
      next.state,
      next.version,
      residueMembersText(next),
    ];
    const statement =
      expected === null
        ? `INSERT IGNORE INTO ${this.table} (id, set_id, member_id, epoch, delta, remainder, state, version, members) SELECT 1, ?, ?, ?, ?, ?, ?, ?, ? FROM DUAL WHERE @@global.read_only = 0`
        : `UPDATE ${this.table} SET set_id = ?, member_id = ?, epoch = ?, delta = ?, remainder = ?, state = ?, version = ?, members = ? WHERE id = 1 AND version = ? AND @@global.read_only = 0`;
    const [results] = await this.send<[ResultSetHeader, RowDataPacket[]]>(
      conn,
      `${statement}; SELECT @@global.read_only AS read_only`,
      expected === null ? values : [...values, expected],
    );
    if (results[0].affectedRows === 1) return true;
    if (Number(results[1][0]?.read_only) !== 0) throw this.readOnly();
    return false;
  }
}
