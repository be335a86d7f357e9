// What a database error means for an adapter, whatever the database: the kinds every SQL adapter
// (@leaf/mysql-support, @leaf/postgres-support) sorts its driver's errors into, the LeafError code
// each kind gets, and the one form of their messages and details. Core knows no database: the
// drivers' codes are sorted by their adapters.
import { type ErrorCode, ErrorCodes, LeafError } from "./errors";

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

/** What {@link databaseError} makes a LeafError of. */
export interface DatabaseErrorParts {
  component: string;
  code: ErrorCode;
  /** What happened, with the server and its own text: "missing table on db:5432: ...". */
  problem: string;
  /** What the operator changes: "create the table with createSchema()". */
  fix: string;
  /** What was being done: "taking a range of tag \"a\"". */
  doing: string;
  /** The driver's own details (its kind and codes), first in `details`. */
  details: Record<string, unknown>;
  /** The server, "host:port", when known. */
  host?: string;
  /** True when the server could not be reached or did not answer. */
  unreachable?: boolean;
  cause?: unknown;
}

/**
 * The LeafError of a database error as every SQL adapter words it: the message
 * `PROBLEM while DOING; FIX`, with `details.problem` and `details.fix` apart so that a server can
 * restate the fix in its own keys, `details.host` when known and `details.unreachable: true` for a
 * server that did not answer.
 */
export function databaseError(parts: DatabaseErrorParts): LeafError {
  const { problem, fix } = parts;
  return new LeafError({
    component: parts.component,
    code: parts.code,
    message: `${problem} while ${parts.doing}; ${fix}`,
    details: {
      ...parts.details,
      problem,
      fix,
      ...(parts.host ? { host: parts.host } : {}),
      ...(parts.unreachable ? { unreachable: true } : {}),
    },
    cause: parts.cause,
  });
}
