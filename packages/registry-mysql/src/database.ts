// The MySQL side of the registry: where the database is (a URL, a JDBC url as Leaf's leaf.jdbc.url,
// mysql2 options or a ready pool), statements with a hard time limit so that a hung server never
// stalls a lease, and MySQL errors turned into LeafErrors that say what to do.
import { configError, ErrorCodes, LeafError } from "@leaf/core";
import {
  classifyMysqlError,
  mysqlError,
  OpenSockets,
  parseMysqlUrl,
  redactMysqlUrl,
} from "@leaf/mysql-support";
import {
  type Connection,
  createConnection,
  createPool,
  type Pool,
  type PoolConnection,
  type PoolOptions,
  type ResultSetHeader,
  type RowDataPacket,
} from "mysql2/promise";

/** The component name in error messages. */
export const COMPONENT = "registry-mysql";

/**
 * Where the database is: a mysql2 pool (left open by `close()`), mysql2 pool options, or a URL:
 * `mysql://user:password@host:3306/leaf` or Leaf's JDBC url `jdbc:mysql://host:3306/leaf?...`
 * (its query parameters are JDBC driver settings and are ignored).
 */
export type MysqlConnection = string | PoolOptions | Pool;

/** How an operator fixes the registry's configuration, in its option names. */
const FIXES = {
  credentials: "the user and password (the url, or the user / password options)",
  database: "the database in the url",
  createTable: "createSchema() (or the package's sql/ file) first",
  server: "the url option",
};

/** True when `error` says the server could not be reached or did not answer in time. */
export function isUnreachable(error: unknown): boolean {
  if (error instanceof LeafError) return error.details.unreachable === true;
  return classifyMysqlError(error).kind === "unreachable";
}

/** Turns a mysql2 error into a LeafError naming what was being done and the operator's fix. */
export function toLeafError(error: unknown, doing: string): LeafError {
  return mysqlError(error, { component: COMPONENT, doing, fixes: FIXES });
}

/** Turns a URL or options into mysql2 pool options. */
export function poolOptions(
  connection: string | PoolOptions,
  user: string | undefined,
  password: string | undefined,
): PoolOptions {
  let options: PoolOptions;
  if (typeof connection === "string") {
    const parsed = parseMysqlUrl(connection, { component: COMPONENT, key: "url" });
    const [first, ...others] = parsed.hosts;
    if (others.length > 0) {
      throw configError(
        COMPONENT,
        "url",
        redactMysqlUrl(connection),
        "a URL with one host: the registry talks to one MySQL server (put a proxy or a virtual IP in front of a failover pair)",
      );
    }
    options = {
      host: first!.host,
      port: first!.port,
      ...(parsed.user ? { user: parsed.user } : {}),
      ...(parsed.password ? { password: parsed.password } : {}),
      ...(parsed.database ? { database: parsed.database } : {}),
    };
  } else if (typeof connection === "object" && connection !== null) {
    options = { ...connection };
  } else {
    throw configError(COMPONENT, "url", connection, "a URL, mysql2 options or a pool");
  }
  if (user !== undefined) options.user = user;
  if (password !== undefined) options.password = password;
  return options;
}

/** Settings of {@link Database}: a URL or mysql2 options it makes a pool from, or a pool. */
export interface DatabaseSettings {
  url?: string | PoolOptions;
  client?: Pool;
  /** mysql2 pool options laid over those of the URL. */
  poolOptions?: PoolOptions;
  user?: string;
  password?: string;
  /** Time limit of every statement and connection attempt, ms. */
  timeoutMs: number;
}

/** A pool with time-limited statements. */
export class Database {
  readonly pool: Pool;
  readonly timeoutMs: number;
  /** Connection options when this registry made the pool (undefined for a pool it was given). */
  private readonly options: PoolOptions | undefined;
  /** The sockets of the connections handed out that are still open (see {@link end}). */
  private readonly sockets = new OpenSockets();

  constructor(settings: DatabaseSettings) {
    this.timeoutMs = settings.timeoutMs;
    if (settings.client) {
      this.pool = settings.client;
      this.options = undefined;
    } else {
      this.options = {
        connectTimeout: settings.timeoutMs,
        enableKeepAlive: true,
        supportBigNumbers: true,
        ...poolOptions(settings.url!, settings.user, settings.password),
        ...settings.poolOptions,
      };
      this.pool = createPool({ connectionLimit: 4, ...this.options });
    }
  }

  /** Runs one statement on a pooled connection; a connection that failed is thrown away. */
  async query<T extends RowDataPacket[] | ResultSetHeader>(
    sql: string,
    params: unknown[],
    doing: string,
  ): Promise<T> {
    const connection = await limit(this.pool.getConnection(), this.timeoutMs, doing, (late) =>
      late.release(),
    );
    this.sockets.watch(connection);
    try {
      const result = await runOn<T>(connection, sql, params, this.timeoutMs, doing);
      connection.release();
      return result;
    } catch (error) {
      if (isUnreachable(error)) connection.destroy();
      else connection.release();
      throw error;
    }
  }

  /**
   * A connection of the caller's own until {@link giveBack} (named locks live in one session): a
   * new one when this registry made the pool, so held locks never starve the pool; else one taken
   * out of the given pool.
   */
  hold(doing: string): Promise<Connection> {
    const pending: Promise<Connection> = this.options
      ? createConnection(this.options)
      : this.pool.getConnection();
    return limit(pending, this.timeoutMs, doing, (late) => this.giveBack(late)).then(
      (connection) => {
        // An idle connection the server closes emits "error"; without a listener it would crash.
        connection.on("error", () => {});
        this.sockets.watch(connection);
        return connection;
      },
    );
  }

  /** Returns a held connection: back to the given pool, or closed. */
  giveBack(connection: Connection): void {
    const pooled = connection as Partial<PoolConnection>;
    if (!this.options && typeof pooled.release === "function") pooled.release();
    else connection.end().catch(() => connection.destroy());
  }

  /**
   * Closes the pool when this registry created it. Statements in flight get up to `timeoutMs` to
   * answer; then the sockets still open are destroyed and end() returns. mysql2's pool end queues
   * each connection's quit behind its last statement, and one whose server does not answer
   * (SIGSTOPped, cut off) would hold it until the server answers, however long. Nothing is sent
   * again: a statement without an answer stays as its call reported it (UNAVAILABLE, outcome
   * unknown).
   */
  async end(): Promise<void> {
    if (this.options) await this.sockets.endWithin(this.pool.end(), this.timeoutMs);
  }
}

/** `pending`, or a timeout error after `ms`; a result arriving late is handed to `late`. */
async function limit<T>(
  pending: Promise<T>,
  ms: number,
  doing: string,
  late: (value: T) => void,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(timeoutError(ms, `connecting for ${doing}`));
    }, ms);
  });
  try {
    return await Promise.race([pending, timeout]);
  } catch (error) {
    if (timedOut) pending.then(late).catch(() => {});
    throw toLeafError(error, doing);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs one statement on `connection` with a time limit; errors come back as LeafErrors. */
export async function runOn<T extends RowDataPacket[] | ResultSetHeader>(
  connection: Connection,
  sql: string,
  params: unknown[],
  timeoutMs: number,
  doing: string,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timeoutError(timeoutMs, doing)), timeoutMs);
  });
  const pending = connection.query(sql, params);
  // After a timeout the connection is destroyed and the statement fails late: nobody waits for it.
  pending.catch(() => {});
  try {
    const [result] = await Promise.race([pending, timeout]);
    return result as T;
  } catch (error) {
    throw toLeafError(error, doing);
  } finally {
    clearTimeout(timer);
  }
}

function timeoutError(ms: number, doing: string): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message: `MySQL did not answer within ${ms} ms while ${doing}; check the server and the network`,
    details: { unreachable: true, mysqlCode: "LEAF_TIMEOUT", timeoutMs: ms },
  });
}

export function isPool(value: unknown): value is Pool {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as Pool).getConnection === "function" &&
    typeof (value as Pool).end === "function"
  );
}

/** Reads a BIGINT column that mysql2 returns as a number or (when large) a string. */
export function toMs(value: unknown): number {
  if (value === null || value === undefined) return 0;
  const number = typeof value === "number" ? value : Number(value);
  return Number.isSafeInteger(number) && number > 0 ? number : 0;
}
