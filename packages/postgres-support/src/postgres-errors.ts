// PostgreSQL errors as an operator reads them, shared by every package that talks to PostgreSQL
// (the segment store, the PostgreSQL registry): a pg error is classified by its SQLSTATE, without
// importing pg (an error without one is a server that did not answer), into unreachable /
// interrupted / access / schema / read-only / statement, and turned into a LeafError whose message
// says what happened and what to change.
import { LeafError } from "@leaf/core";
import { type DatabaseErrorKind, databaseError, databaseErrorCode } from "@leaf/core/adapter";

/** What a PostgreSQL error means for the caller (see `DatabaseErrorKind` in @leaf/core/adapter). */
export type PostgresErrorKind = DatabaseErrorKind;

/** A classified PostgreSQL error. */
export interface PostgresErrorInfo {
  kind: PostgresErrorKind;
  /**
   * The server's SQLSTATE; undefined when the server did not answer (a socket error, a timeout).
   */
  sqlState: string | undefined;
  /** The server's (or the socket's) own text. */
  text: string;
  /**
   * For `statement`: true when the same statement may succeed on another try or another host
   * (serialization failure, deadlock, a lock not available), false when it is refused for good.
   */
  transient: boolean;
}

/** SQLSTATEs by what they mean for an adapter (PostgreSQL's errcodes, appendix A of its manual). */
const KINDS: Record<string, PostgresErrorKind> = {
  "28000": "access", // invalid_authorization_specification: no such role, pg_hba refuses
  "28P01": "access", // invalid_password
  "42501": "access", // insufficient_privilege: "permission denied for table ..."
  "3D000": "schema", // invalid_catalog_name: the database does not exist
  "3F000": "schema", // invalid_schema_name
  "42P01": "schema", // undefined_table (or sequence)
  "42703": "schema", // undefined_column
  "25006": "read-only", // read_only_sql_transaction: a standby, default_transaction_read_only
  "57014": "interrupted", // query_canceled: statement_timeout, pg_cancel_backend
  "57P01": "unreachable", // admin_shutdown: pg_terminate_backend, a fast shutdown
  "57P02": "unreachable", // crash_shutdown
  "57P03": "unreachable", // cannot_connect_now: starting up, shutting down, recovering
  "53300": "unreachable", // too_many_connections
};

/**
 * The SQLSTATE of an error the server sent (pg gives it as `code`, with a `severity`); undefined
 * for an error of the client side (a socket error, a timeout), whose `code` is Node's
 * ("ECONNREFUSED").
 */
export function sqlStateOf(error: unknown): string | undefined {
  const e = (error ?? {}) as { code?: unknown; severity?: unknown };
  const code = typeof e.code === "string" ? e.code : "";
  return /^[0-9A-Z]{5}$/.test(code) && typeof e.severity === "string" ? code : undefined;
}

/**
 * Classifies a pg error (or a socket error) by its SQLSTATE. An error without one came from the
 * client side: the connection failed, timed out or was closed, so the server's answer is unknown
 * (`unreachable`). Class 08 is a connection exception (`unreachable`); class 40 (serialization,
 * deadlock), 55P03 (lock not available), 53 (insufficient resources), 58 and XX (system and
 * internal errors) are transient statements.
 */
export function classifyPostgresError(error: unknown): PostgresErrorInfo {
  const e = (error ?? {}) as { message?: unknown };
  const text = typeof e.message === "string" ? e.message : String(error);
  const sqlState = sqlStateOf(error);
  const info = (kind: PostgresErrorKind, transient = false): PostgresErrorInfo => ({
    kind,
    sqlState,
    text,
    transient,
  });
  if (sqlState === undefined) return info("unreachable");
  const kind = KINDS[sqlState] ?? (sqlState.startsWith("08") ? "unreachable" : undefined);
  if (kind) return info(kind);
  return info("statement", /^(40|53|55P03|58|XX)/.test(sqlState));
}

/** How the operator fixes a configuration error, in the caller's words (options or keys). */
export interface PostgresFixes {
  /** Where the user and password are set, e.g. "the user and password in url". */
  credentials: string;
  /** Where the database is named, e.g. "the database in url". */
  database: string;
  /** How the table is created, e.g. "createSchema() (or the package's sql/ file) first". */
  createTable: string;
  /** Where the server is named, e.g. "url". */
  server: string;
}

/** What {@link postgresError} needs besides the error. */
export interface PostgresErrorContext {
  /** Component in the message: "segment", "registry-postgres". */
  component: string;
  /** What was being done: "taking a range of tag \"a\"". */
  doing: string;
  /** The server, "host:port", when known. */
  host?: string;
  /** The table the statements use, named in the grant of a missing privilege. */
  table?: string;
  /** A sequence the statements use (nextval), named in that grant too. */
  sequence?: string;
  fixes: PostgresFixes;
}

/**
 * The operator's reading of a PostgreSQL error: what happened (`problem`) and what to change
 * (`fix`). The message is `PROBLEM while DOING; FIX`.
 */
export function describePostgresError(
  info: PostgresErrorInfo,
  context: Omit<PostgresErrorContext, "component" | "doing">,
): { problem: string; fix: string } {
  const on = context.host ? ` on ${context.host}` : "";
  const text = info.sqlState === undefined ? info.text : `${info.text} (${info.sqlState})`;
  const { fixes } = context;
  switch (info.kind) {
    case "access": {
      if (info.sqlState !== "42501") {
        return { problem: `access denied${on}: ${text}`, fix: `check ${fixes.credentials}` };
      }
      const sequence = context.sequence ? ` and on the sequence ${context.sequence}` : "";
      return {
        problem: `missing privilege${on}: ${text}`,
        fix: `grant it (GRANT SELECT, INSERT, UPDATE, DELETE ON ${context.table ?? "the table"} TO the user; USAGE on its schema${sequence}), or check ${fixes.credentials}`,
      };
    }
    case "schema":
      return info.sqlState === "3D000"
        ? {
            problem: `unknown database${on}: ${text}`,
            fix: `check ${fixes.database}, or create the database (CREATE DATABASE ...)`,
          }
        : {
            problem: `${info.sqlState === "42703" ? "the table has a missing column" : "missing table"}${on}: ${text}`,
            fix: `create the table with ${fixes.createTable}`,
          };
    case "read-only":
      return {
        problem: `the server${on} is read-only (a standby, or default_transaction_read_only): ${text}`,
        fix: `point ${fixes.server} at the primary, or make it writable (promote it, or ALTER SYSTEM SET default_transaction_read_only = off)`,
      };
    case "interrupted":
      return {
        problem: `PostgreSQL${on} cancelled the statement: ${text}`,
        fix: "try again; if it recurs, check what cancels statements on the server (pg_cancel_backend by an operator or a tool, statement_timeout, lock_timeout)",
      };
    case "unreachable":
      return {
        problem: `PostgreSQL${on} is unreachable: ${info.text}`,
        fix: `check that the server is up and that ${fixes.server} names it (host and port)`,
      };
    default:
      return {
        problem: `PostgreSQL${on} refused the statement: ${text}`,
        fix: "see the PostgreSQL error above",
      };
  }
}

/**
 * A LeafError for a PostgreSQL error: INVALID_CONFIG for access and schema errors (the
 * configuration must change), UNAVAILABLE for unreachable, read-only and interrupted servers and
 * transient statements, INVALID_ARGUMENT for a statement refused. `details`: `postgres` (the kind),
 * `sqlState`, `problem`, `fix` (so that a server can restate the fix in its own keys), `host` when
 * known, and `unreachable: true` for an unreachable server. A LeafError is returned as it is.
 * `info` is the classification when the caller knows the error better than its SQLSTATE does (an
 * adapter's own refusal of a read-only server); by default {@link classifyPostgresError}'s.
 */
export function postgresError(
  error: unknown,
  context: PostgresErrorContext,
  info?: PostgresErrorInfo,
): LeafError {
  if (error instanceof LeafError) return error;
  const classified = info ?? classifyPostgresError(error);
  return databaseError({
    component: context.component,
    code: databaseErrorCode(classified),
    ...describePostgresError(classified, context),
    doing: context.doing,
    details: { postgres: classified.kind, sqlState: classified.sqlState },
    host: context.host,
    unreachable: classified.kind === "unreachable",
    cause: error,
  });
}
