// PostgreSQL errors as an operator reads them: a pg error is classified by its SQLSTATE (or, with
// none, as a server that did not answer) into the kinds the host failover knows, and turned into a
// LeafError whose message says what happened and what to change.
import { LeafError } from "@leaf/core";
import { type DatabaseErrorKind, databaseErrorCode } from "@leaf/core/adapter";
import {
  COMPONENT,
  type HostErrorInfo,
  ReadOnlyHost,
  type STORE_FIXES,
} from "@leaf/segment/adapter";

/** SQLSTATEs by what they mean for the store (PostgreSQL's errcodes, appendix A). */
const KINDS: Record<string, DatabaseErrorKind> = {
  "28000": "access", // invalid_authorization_specification: no such role, pg_hba refuses
  "28P01": "access", // invalid_password
  "42501": "access", // insufficient_privilege: "permission denied for table ..."
  "3D000": "schema", // invalid_catalog_name: the database does not exist
  "3F000": "schema", // invalid_schema_name
  "42P01": "schema", // undefined_table
  "42703": "schema", // undefined_column
  "25006": "read-only", // read_only_sql_transaction: a standby, default_transaction_read_only
  "57014": "interrupted", // query_canceled: statement_timeout, pg_cancel_backend
  "57P01": "unreachable", // admin_shutdown: pg_terminate_backend, a fast shutdown
  "57P02": "unreachable", // crash_shutdown
  "57P03": "unreachable", // cannot_connect_now: starting up, shutting down
  "53300": "unreachable", // too_many_connections
};

/**
 * Classifies a pg error (or a socket error) by its SQLSTATE. An error without one came from the
 * client side: the connection failed, timed out or was closed, so the server's answer is unknown.
 */
export function classifyPostgresError(error: unknown): HostErrorInfo {
  const e = (error ?? {}) as { code?: unknown; severity?: unknown; message?: unknown };
  const text = typeof e.message === "string" ? e.message : String(error);
  const info = (
    kind: DatabaseErrorKind,
    serverCode?: string,
    transient = false,
  ): HostErrorInfo => ({
    kind,
    serverCode,
    text,
    transient,
  });
  if (error instanceof ReadOnlyHost) return info("read-only", "25006");
  const code = typeof e.code === "string" ? e.code : "";
  const fromServer = /^[0-9A-Z]{5}$/.test(code) && typeof e.severity === "string";
  if (!fromServer) return info("unreachable");
  const kind = KINDS[code] ?? (code.startsWith("08") ? "unreachable" : undefined);
  if (kind) return info(kind, code);
  // Class 40 is transaction rollback (serialization, deadlock), 55P03 a lock not available, 53
  // insufficient resources, 58 and XX system and internal errors.
  return info("statement", code, /^(40|53|55P03|58|XX)/.test(code));
}

/**
 * A LeafError for a PostgreSQL error: INVALID_CONFIG for access and schema errors (the
 * configuration must change), UNAVAILABLE for unreachable, read-only and interrupted servers and
 * transient errors, INVALID_ARGUMENT for a statement refused. `details`: `postgres` (the kind),
 * `sqlState`, `problem`, `fix`, `host`, and `unreachable: true` for an unreachable server.
 */
export function postgresError(
  error: unknown,
  context: { doing: string; host: string; table: string; fixes: typeof STORE_FIXES },
): LeafError {
  if (error instanceof LeafError) return error;
  const info = classifyPostgresError(error);
  const { problem, fix } = describe(info, context);
  return new LeafError({
    component: COMPONENT,
    code: databaseErrorCode(info),
    message: `${problem} while ${context.doing}; ${fix}`,
    details: {
      postgres: info.kind,
      sqlState: info.serverCode,
      problem,
      fix,
      host: context.host,
      ...(info.kind === "unreachable" ? { unreachable: true } : {}),
    },
    cause: error,
  });
}

function describe(
  info: HostErrorInfo,
  context: { host: string; table: string; fixes: typeof STORE_FIXES },
): { problem: string; fix: string } {
  const on = ` on ${context.host}`;
  const text = info.serverCode === undefined ? info.text : `${info.text} (${info.serverCode})`;
  const { fixes } = context;
  switch (info.kind) {
    case "access":
      return info.serverCode === "42501"
        ? {
            problem: `missing privilege${on}: ${text}`,
            fix: `grant it (GRANT SELECT, INSERT, UPDATE, DELETE ON ${context.table} TO the user; USAGE on its schema), or check ${fixes.credentials}`,
          }
        : { problem: `access denied${on}: ${text}`, fix: `check ${fixes.credentials}` };
    case "schema":
      return info.serverCode === "3D000"
        ? {
            problem: `unknown database${on}: ${text}`,
            fix: `check ${fixes.database}, or create the database (CREATE DATABASE ...)`,
          }
        : {
            problem: `${info.serverCode === "42703" ? "the table has a missing column" : "missing table"}${on}: ${text}`,
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
