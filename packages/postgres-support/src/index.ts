// `@leaf/postgres-support`: what the PostgreSQL adapters (@leaf/registry-postgres,
// @leaf/segment-postgres) share, kept here once so that @leaf/core knows no database.
export {
  classifyPostgresError,
  describePostgresError,
  type PostgresErrorContext,
  type PostgresErrorInfo,
  type PostgresErrorKind,
  type PostgresFixes,
  postgresError,
  sqlStateOf,
} from "./postgres-errors";
export { DEFAULT_SCHEMA, qualifyPostgresTable, SCHEMA_LOCK_SQL } from "./postgres-table";
export {
  type ParsedPostgresUrl,
  type PostgresHost,
  type PostgresUrlOptions,
  parsePostgresUrl,
  redactPostgresUrl,
} from "./postgres-url";
