// Which table a PostgreSQL adapter names: an unqualified table name means the table in `public`,
// never the one PostgreSQL's search_path finds for the connecting user. Two nodes of one service
// that log in as different users (one with a schema named after it, which "$user" in the default
// search_path puts first) must still share one table, or both hold the same worker id or range.

/** The schema of a table named without one. */
export const DEFAULT_SCHEMA = "public";

/**
 * The table `table` names, schema included: `schema.table` as written, an unqualified name in
 * {@link DEFAULT_SCHEMA} (`leaf_alloc` is `public.leaf_alloc`). Derived names (a sequence, a table
 * beside it) are made from the answer, so they live in the same schema. Checks nothing: the caller
 * has checked the name (letters, digits, `_`, at most one `.`).
 */
export function qualifyPostgresTable(table: string): string {
  return table.includes(".") ? table : `${DEFAULT_SCHEMA}.${table}`;
}

/**
 * The statement that lets several processes create the same tables at once: run first in the
 * transaction of `CREATE ... IF NOT EXISTS` statements, it takes a transaction-level advisory
 * lock (one key for every Leaf table, released at commit or rollback), so that the second process
 * waits for the first's commit and then finds the tables. Without it PostgreSQL checks IF NOT
 * EXISTS before it inserts the catalog rows, and the second CREATE fails with a duplicate key in
 * `pg_type` or `pg_class` (23505) or an existing type (42710): servers, or a server's worker
 * processes, started together on an empty database with their tables to create failed to start.
 * No privilege is needed for it.
 */
export const SCHEMA_LOCK_SQL = "SELECT pg_advisory_xact_lock(7810756220220105836)";
