// The PostgreSQL side of the registry: a pg pool (from a URL, or the caller's), statements with a
// hard time limit so that a hung server never stalls a lease (a connection that timed out is
// destroyed, never reused), pg errors turned into LeafErrors that say what to do, and int8 columns
// read exactly.
import { configError, ErrorCodes, LeafError } from "@leaf/core";
import pg from "pg";

/** The component name in error messages. */
export const COMPONENT = "registry-postgres";

/** What a PostgreSQL error means for the registry. */
type ErrorKind = "unreachable" | "read-only" | "access" | "schema" | "statement";

/** SQLSTATEs by what they mean here (PostgreSQL's errcodes, appendix A of its manual). */
const KINDS: Record<string, ErrorKind> = {
  "28000": "access", // invalid_authorization_specification: no such role, pg_hba refuses
  "28P01": "access", // invalid_password
  "42501": "access", // insufficient_privilege
  "3D000": "schema", // invalid_catalog_name: no such database
  "3F000": "schema", // invalid_schema_name
  "42P01": "schema", // undefined_table (or the grant sequence)
  "42703": "schema", // undefined_column
  "25006": "read-only", // read_only_sql_transaction: a standby, default_transaction_read_only
  "57014": "unreachable", // query_canceled: statement_timeout; the write's fate is unknown
  "57P01": "unreachable", // admin_shutdown
  "57P02": "unreachable", // crash_shutdown
  "57P03": "unreachable", // cannot_connect_now: starting up, shutting down, recovering
  "53300": "unreachable", // too_many_connections
};

/** The SQLSTATE of a server error, undefined for client-side errors (socket, timeout). */
export function sqlState(error: unknown): string | undefined {
  const e = (error ?? {}) as { code?: unknown; severity?: unknown };
  const code = typeof e.code === "string" ? e.code : "";
  return /^[0-9A-Z]{5}$/.test(code) && typeof e.severity === "string" ? code : undefined;
}

function kindOf(error: unknown): ErrorKind {
  const state = sqlState(error);
  // No SQLSTATE: the connection failed, timed out or was closed; the server's answer is unknown.
  if (state === undefined) return "unreachable";
  return KINDS[state] ?? (state.startsWith("08") ? "unreachable" : "statement");
}

/** True when `error` says the server could not be reached or did not answer in time. */
export function isUnreachable(error: unknown): boolean {
  if (error instanceof LeafError) return error.details.unreachable === true;
  return kindOf(error) === "unreachable";
}

/** The refusal of a server that is a standby or takes no writes. */
export function readOnlyError(host: string, doing: string, text: string): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message:
      `PostgreSQL on ${host} takes no writes (${text}) while ${doing}: leases must be written on ` +
      "the primary, and a standby's rows may be behind it. Point url at the primary (promote a " +
      "standby first when the primary is gone for good)",
    details: { postgres: "read-only", host },
  });
}

/** Turns a pg error into a LeafError naming what was being done and the operator's fix. */
export function toLeafError(error: unknown, doing: string, host: string): LeafError {
  if (error instanceof LeafError) return error;
  const kind = kindOf(error);
  const state = sqlState(error);
  const text = `${error instanceof Error ? error.message : String(error)}${state ? ` (${state})` : ""}`;
  if (kind === "read-only") return readOnlyError(host, doing, text);
  const fix = {
    unreachable: "check that the server is up and that url names it (host and port)",
    access:
      "check the user and password in url, and grant the user SELECT, INSERT, UPDATE, DELETE on the table and USAGE on its sequence",
    schema:
      "check the database in url, and create the table with createSchema() (or the package's sql/ file) first",
    statement: "see the PostgreSQL error above",
  }[kind];
  return new LeafError({
    component: COMPONENT,
    code:
      kind === "access" || kind === "schema"
        ? ErrorCodes.INVALID_CONFIG
        : kind === "unreachable"
          ? ErrorCodes.UNAVAILABLE
          : ErrorCodes.INVALID_ARGUMENT,
    message: `PostgreSQL on ${host}: ${text} while ${doing}; ${fix}`,
    details: {
      postgres: kind,
      sqlState: state,
      host,
      ...(kind === "unreachable" ? { unreachable: true } : {}),
    },
    cause: error,
  });
}

function timeoutError(ms: number, doing: string, host: string): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message: `PostgreSQL on ${host} did not answer within ${ms} ms while ${doing}; check the server and the network`,
    details: { unreachable: true, postgres: "unreachable", timeoutMs: ms, host },
  });
}

/** Whether `value` looks like a pg Pool (judged by its methods: it may come from another copy). */
export function isPool(value: unknown): value is pg.Pool {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as pg.Pool).connect === "function" &&
    typeof (value as pg.Pool).query === "function" &&
    typeof (value as pg.Pool).end === "function"
  );
}

/** The URL with its password hidden, for messages. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z]+:\/\/[^:/@]*:)[^@]*@/i, "$1***@");
}

/** Checks a postgres:// URL with one host and returns it. */
export function checkUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    parsed = new URL("invalid:");
  }
  if (
    (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") ||
    parsed.hostname === "" ||
    parsed.host.includes(",")
  ) {
    throw configError(
      COMPONENT,
      "url",
      redactUrl(url),
      "a URL with one host, like postgres://user:password@host:5432/leaf (the registry talks to one server: put a proxy or a virtual IP in front of a failover pair)",
    );
  }
  return url;
}

/** Settings of {@link Database}: a URL it makes a pool from, or a pool. */
export interface DatabaseSettings {
  url?: string;
  client?: pg.Pool;
  /** pg pool options laid over those of the URL (ssl, ...). */
  poolOptions?: pg.PoolConfig;
  /** Time limit of every statement and connection attempt, ms. */
  timeoutMs: number;
}

/** A pool with time-limited statements. */
export class Database {
  readonly pool: pg.Pool;
  readonly timeoutMs: number;
  /** The server, for messages: host:port of the URL, or "the given pool". */
  readonly host: string;
  private readonly ownsPool: boolean;

  constructor(settings: DatabaseSettings) {
    this.timeoutMs = settings.timeoutMs;
    if (settings.client) {
      this.pool = settings.client;
      this.ownsPool = false;
      this.host = "the given pool's server";
    } else {
      const url = new URL(settings.url!);
      this.host = url.host;
      this.pool = new pg.Pool({
        connectionString: settings.url,
        connectionTimeoutMillis: settings.timeoutMs,
        keepAlive: true,
        max: 4,
        ...settings.poolOptions,
      });
      this.ownsPool = true;
      // An idle client whose server went away emits "error"; without a listener it would crash.
      this.pool.on("error", () => {});
    }
  }

  /** Runs one statement on a pooled connection; a connection that failed or timed out is dropped. */
  async query<R extends pg.QueryResultRow = Record<string, unknown>>(
    sql: string,
    params: unknown[],
    doing: string,
  ): Promise<pg.QueryResult<R>> {
    const client = await this.limit(this.pool.connect(), doing, (late) => late.release(true));
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        reject(timeoutError(this.timeoutMs, doing, this.host));
      }, this.timeoutMs);
    });
    // A connection that dies while checked out emits "error" on its client: the query fails.
    const ignore = () => {};
    client.on("error", ignore);
    const pending = client.query<R>(sql, params);
    // After a timeout the connection is destroyed and the statement fails late: nobody waits.
    pending.catch(() => {});
    try {
      const result = await Promise.race([pending, timeout]);
      client.release();
      return result;
    } catch (error) {
      client.release(timedOut || isUnreachable(error) ? true : undefined);
      throw toLeafError(error, doing, this.host);
    } finally {
      clearTimeout(timer);
      client.off("error", ignore);
    }
  }

  /** `pending`, or a timeout error; a client arriving late is handed to `late`. */
  private async limit<T>(pending: Promise<T>, doing: string, late: (value: T) => void): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        reject(timeoutError(this.timeoutMs, `connecting for ${doing}`, this.host));
      }, this.timeoutMs);
    });
    try {
      return await Promise.race([pending, timeout]);
    } catch (error) {
      if (timedOut) pending.then(late).catch(() => {});
      throw toLeafError(error, doing, this.host);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Closes the pool when this registry created it. */
  async end(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }
}

/**
 * Reads an int8 column (pg returns it as a string) holding ms since the Unix epoch: exactly, through
 * bigint; 0 for NULL. Throws CORRUPT_DATA for a value that is not a safe non-negative integer.
 */
export function msFrom(value: unknown, column: string): number {
  if (value === null || value === undefined) return 0;
  let exact: bigint;
  try {
    exact = BigInt(value as string);
  } catch {
    exact = -1n;
  }
  if (exact < 0n || exact > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message: `${column} holds ${String(value)}, not a timestamp in ms since the Unix epoch (0 .. 2^53 - 1); fix or delete the row`,
      details: { column, value: String(value) },
    });
  }
  return Number(exact);
}
