// The PostgreSQL side of the registry: a pg pool (from a URL naming one server, or the caller's),
// statements with a hard time limit so that a hung server never stalls a lease (a connection that
// timed out is destroyed, never reused), pg errors turned into LeafErrors that say what to do (by
// @leaf/postgres-support, in this registry's option names), and int8 columns read exactly.
import { configError, ErrorCodes, LeafError } from "@leaf/core";
import { databaseError } from "@leaf/core/adapter";
import {
  classifyPostgresError,
  type PostgresErrorKind,
  parsePostgresUrl,
  postgresError,
  redactPostgresUrl,
} from "@leaf/postgres-support";
import pg from "pg";

/** The component name in error messages. */
export const COMPONENT = "registry-postgres";

/** How an operator fixes the registry's configuration, in its option names. */
const FIXES = {
  credentials: "the user and password (the options user and password, else those in url)",
  database: "the database in url",
  createTable: "createSchema() (or the package's sql/ file) first",
  server: "url",
};

/**
 * The kinds after which the server's answer is unknown: it could not be reached, or it cancelled
 * the statement (statement_timeout, pg_cancel_backend), so a write may or may not have been made.
 */
const ANSWER_UNKNOWN: ReadonlySet<PostgresErrorKind> = new Set(["unreachable", "interrupted"]);

/**
 * True when `error` says the server could not be reached, did not answer in time or cancelled the
 * statement: the connection is dropped, and an acquire has no local fallback.
 */
export function isUnreachable(error: unknown): boolean {
  if (error instanceof LeafError) {
    return error.details.unreachable === true || error.details.postgres === "interrupted";
  }
  return ANSWER_UNKNOWN.has(classifyPostgresError(error).kind);
}

/**
 * The refusal of a server that is a standby or takes no writes; `sqlState` when the server itself
 * refused (25006). `details.problem` and `details.fix` as in @leaf/postgres-support's errors.
 */
export function readOnlyError(
  host: string,
  doing: string,
  text: string,
  sqlState?: string,
  cause?: unknown,
): LeafError {
  return databaseError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    problem: `PostgreSQL on ${host} takes no writes (${text})`,
    fix:
      "leases must be written on the primary, and a standby's rows may be behind it. Point url " +
      "at the primary (promote a standby first when the primary is gone for good)",
    doing,
    details: { postgres: "read-only", sqlState },
    host,
    cause,
  });
}

/** Where an error happened, for its message. */
interface ErrorPlace {
  /** The server, "host:port". */
  host: string;
  /** The table and the sequence of fencing tokens, named when a privilege is missing. */
  table: string;
  sequence: string;
}

/** Turns a pg error into a LeafError naming what was being done and the operator's fix. */
export function toLeafError(error: unknown, doing: string, place: ErrorPlace): LeafError {
  if (error instanceof LeafError) return error;
  const info = classifyPostgresError(error);
  if (info.kind === "read-only") {
    return readOnlyError(
      place.host,
      doing,
      `${info.text} (${info.sqlState})`,
      info.sqlState,
      error,
    );
  }
  return postgresError(error, { component: COMPONENT, doing, ...place, fixes: FIXES });
}

function timeoutError(ms: number, doing: string, host: string): LeafError {
  return databaseError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    problem: `PostgreSQL on ${host} did not answer within ${ms} ms`,
    fix: "check the server and the network",
    doing,
    details: { postgres: "unreachable", timeoutMs: ms },
    host,
    unreachable: true,
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

const ONE_HOST =
  "a URL with one host, like postgres://user:password@host:5432/leaf (the registry talks to one server: put a proxy or a virtual IP in front of a failover pair)";

/** A checked URL: what pg connects with, and the server for messages. */
export interface CheckedUrl {
  /**
   * The URL as pg reads it (JDBC's `jdbc:` dropped; query parameters left to pg), with the given
   * user and password in place of its own.
   */
  connectionString: string;
  /** "host:port". */
  host: string;
}

/** A user and a password that replace a URL's (undefined: the URL's is kept). */
export interface Credentials {
  user?: string;
  password?: string;
}

/**
 * Checks a postgres:// URL (also postgresql:// and jdbc:postgresql://) naming one server, and
 * writes `credentials` into it. pg reads every field of a connection string over its pool options
 * (an explicit user would lose to the URL's), so the given user and password are put in the URL
 * itself, and pg's `user` and `password` query parameters, which it reads over the URL's user
 * information, are dropped. Throws INVALID_CONFIG naming `url`, the password hidden.
 */
export function checkUrl(url: string, credentials: Credentials = {}): CheckedUrl {
  const parsed = parsePostgresUrl(url, { component: COMPONENT, key: "url", expected: ONE_HOST });
  const [first, ...others] = parsed.hosts;
  if (!first || others.length > 0) {
    throw configError(COMPONENT, "url", redactPostgresUrl(url), ONE_HOST);
  }
  const connectionString = url.trim().replace(/^jdbc:/i, "");
  return {
    connectionString: withCredentials(connectionString, credentials),
    host: `${first.host.includes(":") ? `[${first.host}]` : first.host}:${first.port}`,
  };
}

/** `url` with `credentials` as its user information (pg decodes it, so it is encoded here). */
function withCredentials(url: string, { user, password }: Credentials): string {
  if (user === undefined && password === undefined) return url;
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    throw configError(COMPONENT, "url", redactPostgresUrl(url), ONE_HOST);
  }
  if (user !== undefined) {
    if (target.searchParams.has("user")) target.searchParams.delete("user");
    target.username = encodeURIComponent(user);
  }
  if (password !== undefined) {
    if (target.searchParams.has("password")) target.searchParams.delete("password");
    target.password = encodeURIComponent(password);
  }
  return target.href;
}

/**
 * Settings of {@link Database}: a URL it makes a pool from (checked by {@link checkUrl}), or a
 * pool.
 */
export interface DatabaseSettings {
  url?: string;
  client?: pg.Pool;
  /** A user and a password over the URL's. */
  credentials?: Credentials;
  /** pg pool options beside those of the URL (ssl, ...); the URL's fields win. */
  poolOptions?: pg.PoolConfig;
  /** Time limit of every statement and connection attempt, ms. */
  timeoutMs: number;
  /** The table and the sequence of fencing tokens, named in errors when a privilege is missing. */
  table: string;
  sequence: string;
}

/** A pool with time-limited statements. */
export class Database {
  readonly pool: pg.Pool;
  readonly timeoutMs: number;
  /** The server, for messages: host:port of the URL, or "the given pool's server". */
  readonly host: string;
  private readonly ownsPool: boolean;
  private readonly names: { table: string; sequence: string };

  constructor(settings: DatabaseSettings) {
    this.timeoutMs = settings.timeoutMs;
    this.names = { table: settings.table, sequence: settings.sequence };
    if (settings.client) {
      this.pool = settings.client;
      this.ownsPool = false;
      this.host = "the given pool's server";
    } else {
      const { connectionString, host } = checkUrl(settings.url!, settings.credentials);
      this.host = host;
      this.pool = new pg.Pool({
        connectionString,
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

  /**
   * Runs one statement on a pooled connection; a connection that failed or timed out is dropped.
   */
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
      throw toLeafError(error, doing, { host: this.host, ...this.names });
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
      throw toLeafError(error, doing, { host: this.host, ...this.names });
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
 * Reads an int8 column (pg returns it as a string) holding ms since the Unix epoch: exactly,
 * through bigint; 0 for NULL. Throws CORRUPT_DATA for a value that is not a safe non-negative
 * integer.
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
