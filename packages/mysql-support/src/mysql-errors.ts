// MySQL errors as an operator reads them, shared by every package that talks to MySQL (the segment
// store, the MySQL registry): a mysql2 error is classified by its errno or code, without importing
// mysql2, into unreachable / interrupted / access / schema / read-only / statement, and turned into
// a LeafError whose message says what happened and what to change.
import { LeafError } from "@leaf/core";
import { type DatabaseErrorKind, databaseError, databaseErrorCode } from "@leaf/core/adapter";

/** What a MySQL error means for the caller (see `DatabaseErrorKind` in @leaf/core/adapter). */
export type MysqlErrorKind = DatabaseErrorKind;

/** A classified MySQL error. */
export interface MysqlErrorInfo {
  kind: MysqlErrorKind;
  errno: number | undefined;
  /** mysql2's code ("ER_ACCESS_DENIED_ERROR", "ECONNREFUSED", ...), "" when there is none. */
  code: string;
  /** The server's (or the socket's) own text. */
  text: string;
  /**
   * For `statement`: true when the same statement may succeed on another try or another host
   * (deadlock, lock wait, a generic server error), false when the statement itself is refused.
   */
  transient: boolean;
}

/** Codes of a server that cannot be reached or stopped answering. */
const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  "ER_CON_COUNT_ERROR",
  "ER_SERVER_SHUTDOWN",
  "LEAF_TIMEOUT",
]);

const ACCESS_ERRNOS = new Set([
  1044, // ER_DBACCESS_DENIED_ERROR: no rights on the database
  1045, // ER_ACCESS_DENIED_ERROR: wrong user or password
  1142, // ER_TABLEACCESS_DENIED_ERROR: "UPDATE command denied ... for table"
  1143, // ER_COLUMNACCESS_DENIED_ERROR
  1227, // ER_SPECIFIC_ACCESS_DENIED_ERROR: needs SUPER, PROCESS, ...
]);

const SCHEMA_ERRNOS = new Set([
  1049, // ER_BAD_DB_ERROR: unknown database
  1146, // ER_NO_SUCH_TABLE
  1054, // ER_BAD_FIELD_ERROR: unknown column
]);

/**
 * The server stopped the statement: a KILL, a time limit. SQL state 70100 is "query interrupted".
 */
const INTERRUPTED_ERRNOS = new Set([
  1317, // ER_QUERY_INTERRUPTED: KILL QUERY
  1927, // ER_CONNECTION_KILLED (MariaDB): KILL CONNECTION
  1969, // ER_STATEMENT_TIMEOUT (MariaDB): max_statement_time exceeded
  3024, // ER_QUERY_TIMEOUT (MySQL): max_execution_time exceeded
]);

const READ_ONLY_ERRNOS = new Set([
  1290, // ER_OPTION_PREVENTS_STATEMENT (--read-only)
  1836, // ER_READ_ONLY_MODE
  1792, // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
  1036, // ER_OPEN_AS_READONLY (innodb_read_only)
  1015, // ER_CANT_LOCK
  1874, // ER_INNODB_READ_ONLY
]);

/** Classifies a mysql2 error (or a socket error) by its errno, code and SQL state. */
export function classifyMysqlError(error: unknown): MysqlErrorInfo {
  const e = (error ?? {}) as {
    errno?: unknown;
    code?: unknown;
    sqlState?: unknown;
    fatal?: unknown;
    message?: unknown;
  };
  const errno = typeof e.errno === "number" && e.errno > 0 ? e.errno : undefined;
  const code = typeof e.code === "string" ? e.code : "";
  const text = typeof e.message === "string" ? e.message : String(error);
  const sqlState = typeof e.sqlState === "string" ? e.sqlState : undefined;
  const info = (kind: MysqlErrorKind, transient = false): MysqlErrorInfo => ({
    kind,
    errno,
    code,
    text,
    transient,
  });
  if (errno !== undefined && ACCESS_ERRNOS.has(errno)) return info("access");
  if (errno !== undefined && SCHEMA_ERRNOS.has(errno)) return info("schema");
  if (errno !== undefined && READ_ONLY_ERRNOS.has(errno)) return info("read-only");
  if (UNREACHABLE_CODES.has(code) || code.startsWith("PROTOCOL_")) return info("unreachable");
  if ((errno !== undefined && INTERRUPTED_ERRNOS.has(errno)) || sqlState === "70100") {
    return info("interrupted");
  }
  // A fatal protocol error: the connection is gone.
  if (e.fatal === true) return info("unreachable");
  // Not an answer of the server (no SQL state): worth another try, but not a sign of a server down.
  if (errno === undefined || sqlState === undefined) return info("statement", true);
  // Class 08 is connection exceptions, 40 transaction rollback (deadlock), HY000 generic.
  return info("statement", /^(08|40|HY)/.test(sqlState));
}

/** How the operator fixes a configuration error, in the caller's words (options or keys). */
export interface MysqlFixes {
  /** Where the user and password are set, e.g. "the user and password options". */
  credentials: string;
  /** Where the database is named, e.g. "the database in the URL". */
  database: string;
  /** How the table is created, e.g. "createSchema() or sql/leaf_alloc.sql". */
  createTable: string;
  /** Where the server is named, e.g. "the url option". */
  server: string;
}

/** What {@link mysqlError} needs besides the error. */
export interface MysqlErrorContext {
  /** Component in the message: "segment", "registry-mysql". */
  component: string;
  /** What was being done: "taking a range of tag \"a\"". */
  doing: string;
  /** The server, "host:port", when known. */
  host?: string;
  /** The table the statement uses, named when a privilege on it is missing. */
  table?: string;
  fixes: MysqlFixes;
}

/**
 * The operator's reading of a MySQL error: what happened (`problem`) and what to change (`fix`).
 * The message is `PROBLEM while DOING; FIX`.
 */
export function describeMysqlError(
  info: MysqlErrorInfo,
  context: Omit<MysqlErrorContext, "component">,
): { problem: string; fix: string } {
  const on = context.host ? ` on ${context.host}` : "";
  const id = [info.code, info.errno].filter((part) => part !== "" && part !== undefined).join(" ");
  const text = id === "" ? info.text : `${info.text} (${id})`;
  const { fixes } = context;
  // "connect ECONNREFUSED 10.0.0.5:3306": the host is named once, in `on`.
  const socketText = context.host ? info.text.replaceAll(` ${context.host}`, "") : info.text;
  switch (info.kind) {
    case "access": {
      if (info.errno === 1045) {
        return {
          problem: `access denied${on}: ${text}`,
          fix: `check ${fixes.credentials}`,
        };
      }
      if (info.errno === 1044) {
        return {
          problem: `access denied to the database${on}: ${text}`,
          fix: `check ${fixes.database}, and grant the user its rights on it (GRANT SELECT, INSERT, UPDATE ON db.* TO ...)`,
        };
      }
      const command = /^(\w+) command denied/i.exec(info.text)?.[1]?.toUpperCase();
      const table = context.table ? ` on table ${context.table}` : "";
      return {
        problem: command
          ? `missing privilege${on}: the user may not ${command}${table} (${info.text})`
          : `missing privilege${on}: ${text}`,
        fix: command
          ? `grant it (GRANT ${command} ON ${context.table ?? "the table"} TO the user), or check ${fixes.credentials}`
          : `grant the user the privilege named, or check ${fixes.credentials}`,
      };
    }
    case "schema":
      if (info.errno === 1049) {
        return {
          problem: `unknown database${on}: ${text}`,
          fix: `check ${fixes.database}, or create the database (CREATE DATABASE ...)`,
        };
      }
      return {
        problem: `${info.errno === 1054 ? "the table has a missing column" : "missing table"}${on}: ${text}`,
        fix: `create the table with ${fixes.createTable}`,
      };
    case "read-only":
      return {
        problem: `the server${on} is read-only (a replica?): ${text}`,
        fix: `point ${fixes.server} at the primary, or make it writable (SET GLOBAL read_only = OFF)`,
      };
    case "interrupted":
      return {
        problem: `MySQL${on} interrupted the statement: ${text}`,
        fix: "try again; if it recurs, check what stops statements on the server (KILL by an operator or a tool such as pt-kill, max_statement_time or max_execution_time)",
      };
    case "unreachable":
      return {
        problem: `MySQL${on} is unreachable: ${socketText}${info.code && !socketText.includes(info.code) ? ` (${info.code})` : ""}`,
        fix: `check that the server is up and that ${fixes.server} names it (host and port)`,
      };
    default:
      return {
        problem: `MySQL${on} refused the statement: ${text}`,
        fix: "see the MySQL error above",
      };
  }
}

/**
 * A LeafError for a MySQL error: INVALID_CONFIG for access and schema errors (nothing is retried:
 * the configuration must change), UNAVAILABLE for unreachable and read-only servers and for a
 * statement the server interrupted (KILL, a time limit: the statement itself is fine),
 * INVALID_ARGUMENT for a statement refused. `details`: `mysql` (the kind), `errno`, `mysqlCode`,
 * `problem`, `fix`, `host`, and `unreachable: true` for an unreachable server.
 */
export function mysqlError(error: unknown, context: MysqlErrorContext): LeafError {
  if (error instanceof LeafError) return error;
  const info = classifyMysqlError(error);
  return databaseError({
    component: context.component,
    code: databaseErrorCode(info),
    ...describeMysqlError(info, context),
    doing: context.doing,
    details: { mysql: info.kind, errno: info.errno, mysqlCode: info.code },
    host: context.host,
    unreachable: info.kind === "unreachable",
    cause: error,
  });
}
