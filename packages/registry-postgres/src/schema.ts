// The table leaf_worker_lease (one row per worker id of a service, leased for a time judged by the
// database's clock) and the sequence of fencing tokens, in `public` unless the name gives a schema.
// sql/leaf_worker_lease.sql holds the same statements for the default table name.
import { configError } from "@leaf/core";
import { qualifyPostgresTable, SCHEMA_LOCK_SQL } from "@leaf/postgres-support";
import type pg from "pg";
import { COMPONENT, Database, isPool } from "./database";

/** The default table (in `public`). */
export const DEFAULT_TABLE = "leaf_worker_lease";

/**
 * Checks a table name, `table` or `schema.table` (lower-case letters, digits, underscores, each
 * part starting with a letter or _; the schema at most 63 characters, the table at most 53, so that
 * its sequence's name fits PostgreSQL's 63), and returns it with its schema: `public` when it names
 * none. The registry's statements name that schema, so every node uses the same table whatever
 * user it logs in as (the search_path would put a schema named after the user first).
 */
export function checkTableName(table: unknown, key = "table"): string {
  if (
    typeof table !== "string" ||
    !/^(?:[a-z_][a-z0-9_]{0,62}\.)?[a-z_][a-z0-9_]{0,52}$/.test(table)
  ) {
    throw configError(
      COMPONENT,
      key,
      table,
      "a table name of lower-case letters, digits and _ (at most 53, not starting with a digit), optionally schema.table (public when no schema is named)",
    );
  }
  return qualifyPostgresTable(table);
}

/** The sequence that numbers the grants of `table` (`schema.table`), in the same schema. */
export function grantSequence(table: string): string {
  return `${table}_grant_seq`;
}

/**
 * The CREATE statements of the table and its sequence (`IF NOT EXISTS`, so running them again is
 * harmless).
 */
export function schemaSql(table: string = DEFAULT_TABLE): string {
  const name = checkTableName(table);
  return `-- @leaf/registry-postgres: worker ids leased for a time judged by the database's clock.
-- One row per worker id ever used in a service; a free or expired row is taken by one guarded
-- UPDATE, a never-used id by an INSERT that the primary key decides. Every grant takes a fencing
-- token from the sequence; renewals and the release match it. The schema is named (public unless
-- the table option gives one): every node uses this table, whatever user it logs in as.
CREATE SEQUENCE IF NOT EXISTS ${grantSequence(name)};
CREATE TABLE IF NOT EXISTS ${name} (
  leaf_name varchar(128) NOT NULL,
  worker_id integer NOT NULL,
  grant_token bigint,
  holder_ip varchar(127) NOT NULL DEFAULT '',
  holder_port integer NOT NULL DEFAULT 0,
  lease_until timestamptz,
  last_timestamp bigint NOT NULL DEFAULT 0,
  issue_horizon bigint NOT NULL DEFAULT 0,
  acquired_at timestamptz,
  updated_at timestamptz,
  PRIMARY KEY (leaf_name, worker_id)
);
COMMENT ON TABLE ${name} IS 'worker ids of @leaf/registry-postgres, leased by the database clock';
COMMENT ON COLUMN ${name}.leaf_name IS 'service name (leaf.name): one worker id space each';
COMMENT ON COLUMN ${name}.worker_id IS '0 .. the layout''s largest worker id';
COMMENT ON COLUMN ${name}.grant_token IS 'fencing token of the grant holding the id (from ${grantSequence(name)}); NULL when released';
COMMENT ON COLUMN ${name}.holder_ip IS 'last holder''s ip: it gets the id back first';
COMMENT ON COLUMN ${name}.lease_until IS 'database clock: the holder owns the id until then';
COMMENT ON COLUMN ${name}.last_timestamp IS 'highest timestamp (ms) reported for the id';
COMMENT ON COLUMN ${name}.issue_horizon IS 'holder clock (ms) + lease at its last renewal: past any id it issues before it fences; 0 after release';
`;
}

/**
 * What {@link createSchema} sends: {@link schemaSql} behind the advisory lock that lets several
 * processes run it at once (one query of several statements: one transaction, which the lock
 * lasts).
 */
export function lockedSchemaSql(table: string): string {
  return `${SCHEMA_LOCK_SQL};\n${schemaSql(table)}`;
}

/** Options of {@link createSchema}. */
export interface CreateSchemaOptions {
  /** Table name, optionally `schema.table` (default leaf_worker_lease; no schema: `public`). */
  table?: string;
  /** Statement time limit, ms (default 10,000). */
  timeoutMs?: number;
}

/**
 * Creates the table and its sequence when they do not exist; processes running it at once wait
 * for each other.
 */
export async function createSchema(
  connection: string | pg.Pool,
  options: CreateSchemaOptions = {},
): Promise<void> {
  const table = checkTableName(options.table ?? DEFAULT_TABLE);
  const database = new Database({
    ...(isPool(connection) ? { client: connection } : { url: connection }),
    timeoutMs: options.timeoutMs ?? 10_000,
    table,
    sequence: grantSequence(table),
  });
  try {
    await database.query(lockedSchemaSql(table), [], `creating ${table}`);
  } finally {
    await database.end();
  }
}
