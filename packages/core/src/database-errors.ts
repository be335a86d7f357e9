// What a database error means for an adapter, whatever the database: the kinds every SQL adapter
// (@leaf/mysql-support, the PostgreSQL store) sorts its driver's errors into, and the LeafError code
// each kind gets. Core knows no database: the drivers' codes are sorted by their adapters.
import { type ErrorCode, ErrorCodes } from "./errors";

/**
 * What a database error means for the caller:
 * - `unreachable`: the server could not be reached or stopped answering (retry, or another host);
 * - `access`: the user may not log in, use the database or run the statement (configuration);
 * - `schema`: the database, the table or a column does not exist (configuration);
 * - `interrupted`: the server stopped the statement before it finished (a kill, a cancel, a
 *   statement time limit): nothing is wrong with the statement, and a write may or may not have
 *   been committed when it went (retry, or read first);
 * - `read-only`: the server takes no writes (a replica, a standby; another host may);
 * - `statement`: anything else the server said about the statement.
 */
export type DatabaseErrorKind =
  | "unreachable"
  | "interrupted"
  | "access"
  | "schema"
  | "read-only"
  | "statement";

/**
 * The LeafError code of a classified database error: INVALID_CONFIG for access and schema errors
 * (nothing is retried: the configuration must change), INVALID_ARGUMENT for a statement the server
 * refuses for good, UNAVAILABLE for the rest (unreachable, read-only, interrupted, transient).
 */
export function databaseErrorCode(info: {
  kind: DatabaseErrorKind;
  transient: boolean;
}): ErrorCode {
  if (info.kind === "access" || info.kind === "schema") return ErrorCodes.INVALID_CONFIG;
  if (info.kind === "statement" && !info.transient) return ErrorCodes.INVALID_ARGUMENT;
  return ErrorCodes.UNAVAILABLE;
}
