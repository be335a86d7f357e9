// The segment store's reading of PostgreSQL errors: @leaf/postgres-support's classification and
// messages in the store's component and words, with the store's own refusal of a standby or a
// read-only server (ReadOnlyHost, raised before a write) read as the server's own would be (25006).
import type { LeafError } from "@leaf/core";
import {
  classifyPostgresError as classifyServerError,
  type PostgresErrorInfo,
  postgresError as serverError,
} from "@leaf/postgres-support";
import {
  COMPONENT,
  type HostErrorInfo,
  ReadOnlyHost,
  type STORE_FIXES,
} from "@leaf/segment/adapter";

/** The classification of the store's own read-only refusal; undefined for any other error. */
function refusalInfo(error: unknown): PostgresErrorInfo | undefined {
  if (!(error instanceof ReadOnlyHost)) return undefined;
  return { kind: "read-only", sqlState: "25006", text: error.message, transient: false };
}

/** Classifies a pg error (or a socket error, or the store's read-only refusal) for the failover. */
export function classifyPostgresError(error: unknown): HostErrorInfo {
  const { kind, sqlState, text, transient } = refusalInfo(error) ?? classifyServerError(error);
  return { kind, serverCode: sqlState, text, transient };
}

/**
 * A LeafError for a PostgreSQL error while the store was `doing` something on `host`; see
 * @leaf/postgres-support's `postgresError` for its codes and details.
 */
export function postgresError(
  error: unknown,
  context: { doing: string; host: string; table: string; fixes: typeof STORE_FIXES },
): LeafError {
  return serverError(error, { component: COMPONENT, ...context }, refusalInfo(error));
}
