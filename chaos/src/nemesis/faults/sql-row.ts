// The tag's leaf_alloc row on the family's SQL database, reached as another application or an
// operator reaches it: MariaDB through mysql2, PostgreSQL through pg (the test kit's client). The
// faults that act on the row (`row-lock`, `max-id-back`, `give-back-queued`) are written once
// against this session; only the statements differ per database.
import { connectPostgres, type PostgresHandle } from "@leaf/testkit";
import mysql from "mysql2/promise";
import type { Cluster } from "../cluster";
import type { Family } from "../families";

/** A database whose leaf_alloc table a family serves a tag from. */
export type SqlStore = "mysql" | "postgres";

/** The family's SQL-served tag and its database: MariaDB's `mysqlTag`, else PostgreSQL's. */
export function sqlTagOf(family: Family): { store: SqlStore; tag: string } | undefined {
  if (family.mysqlTag) return { store: "mysql", tag: family.mysqlTag };
  if (family.postgresTag) return { store: "postgres", tag: family.postgresTag };
  return undefined;
}

/** The main servers (spares aside) with a link to the family's `store`: the table's servers. */
export function serversOn(family: Family, store: SqlStore): string[] {
  return family.servers.filter((s) => !s.spare && s.links.includes(store)).map((s) => s.label);
}

/** The database's name in notes. */
export const SQL_NAMES: Record<SqlStore, string> = { mysql: "MariaDB", postgres: "PostgreSQL" };

/** One session on the family's segment table. */
export interface SqlSession {
  /**
   * Opens a transaction and locks the tag's row (`SELECT ... FOR UPDATE`) until `commit()`; its
   * max_id as locked (no range can be taken until the commit), undefined when it has no row.
   */
  lockRow(tag: string): Promise<bigint | undefined>;
  commit(): Promise<void>;
  /** The tag's max_id now, undefined when it has no row. */
  maxId(tag: string): Promise<bigint | undefined>;
  setStep(tag: string, step: number | bigint): Promise<void>;
  setMaxId(tag: string, value: bigint): Promise<void>;
  /** max_id set to `value` where it is lower. */
  raiseMaxId(tag: string, value: bigint): Promise<void>;
  /** Drops the connection without waiting for the server (it may be paused). */
  close(): void;
}

/** A session on MariaDB, which also shows what the other sessions run. */
export interface MysqlSession extends SqlSession {
  /** The statements other sessions are running or waiting on now (information_schema). */
  otherStatements(): Promise<string[]>;
}

/** How long a session waits to connect: a stopped or paused store fails the fault's start soon. */
const CONNECT_TIMEOUT_MS = 2000;

/** A connection to the family's MariaDB (its current primary), big numbers as strings. */
function mysqlConnection(c: Cluster): Promise<mysql.Connection> {
  const handle = c.store("mysql") as unknown as {
    connectionOptions(database?: string): mysql.ConnectionOptions;
  };
  return mysql.createConnection({
    ...handle.connectionOptions(c.db!.database),
    connectTimeout: CONNECT_TIMEOUT_MS,
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
}

/** A session on the family's MariaDB (its current primary). */
export async function mysqlSession(c: Cluster): Promise<MysqlSession> {
  const conn = await mysqlConnection(c);
  const maxIdOf = async (tag: string, lock: string) => {
    const [rows] = await conn.query(`SELECT max_id FROM leaf_alloc WHERE biz_tag = ?${lock}`, [
      tag,
    ]);
    const row = (rows as Array<{ max_id: string }>)[0];
    return row ? BigInt(row.max_id) : undefined;
  };
  return {
    async lockRow(tag) {
      await conn.query("BEGIN");
      return maxIdOf(tag, " FOR UPDATE");
    },
    async commit() {
      await conn.query("COMMIT");
    },
    maxId: (tag) => maxIdOf(tag, ""),
    async setStep(tag, step) {
      await conn.query("UPDATE leaf_alloc SET step = ? WHERE biz_tag = ?", [step.toString(), tag]);
    },
    async otherStatements() {
      const [rows] = await conn.query(
        "SELECT info FROM information_schema.processlist WHERE id <> CONNECTION_ID() AND info IS NOT NULL",
      );
      return (rows as Array<{ info: string }>).map((r) => r.info);
    },
    async setMaxId(tag, value) {
      await conn.query("UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ?", [
        value.toString(),
        tag,
      ]);
    },
    async raiseMaxId(tag, value) {
      await conn.query("UPDATE leaf_alloc SET max_id = GREATEST(max_id, ?) WHERE biz_tag = ?", [
        value.toString(),
        tag,
      ]);
    },
    close: () => conn.destroy(),
  };
}

/** The table as the store names it: schema-qualified, whatever the user's search_path. */
const PG_TABLE = "public.leaf_alloc";

async function postgresSession(c: Cluster): Promise<SqlSession> {
  const handle = c.store("postgres") as PostgresHandle;
  const client = await connectPostgres({
    ...handle.connectionOptions(c.pgDb!.database),
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
  });
  const maxIdOf = async (tag: string, lock: string) => {
    // int8 as text: never through a JS number.
    const result = await client.query<{ max_id: string }>(
      `SELECT max_id::text AS max_id FROM ${PG_TABLE} WHERE biz_tag = $1${lock}`,
      [tag],
    );
    const row = result.rows[0];
    return row ? BigInt(row.max_id) : undefined;
  };
  return {
    async lockRow(tag) {
      await client.query("BEGIN");
      return maxIdOf(tag, " FOR UPDATE");
    },
    async commit() {
      await client.query("COMMIT");
    },
    maxId: (tag) => maxIdOf(tag, ""),
    async setStep(tag, step) {
      await client.query(`UPDATE ${PG_TABLE} SET step = $1 WHERE biz_tag = $2`, [
        step.toString(),
        tag,
      ]);
    },
    async setMaxId(tag, value) {
      await client.query(`UPDATE ${PG_TABLE} SET max_id = $1::bigint WHERE biz_tag = $2`, [
        value.toString(),
        tag,
      ]);
    },
    async raiseMaxId(tag, value) {
      await client.query(
        `UPDATE ${PG_TABLE} SET max_id = GREATEST(max_id, $1::bigint) WHERE biz_tag = $2`,
        [value.toString(), tag],
      );
    },
    close: () => {
      void client.end().catch(() => undefined);
    },
  };
}

/** A new session on the family's `store` (its current primary). */
export function sqlSession(c: Cluster, store: SqlStore): Promise<SqlSession> {
  return store === "mysql" ? mysqlSession(c) : postgresSession(c);
}
