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
