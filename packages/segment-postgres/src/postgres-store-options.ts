// The PostgreSQL store's options: their checks (each bad value named, with what is expected) and
// the pools they describe, one pg Pool per host in failover order.
import {
  type PostgresHost,
  parsePostgresUrl,
  qualifyPostgresTable,
  redactPostgresUrl,
} from "@leaf/postgres-support";
import {
  COMPONENT,
  checkStoreOptions,
  type HostedStoreStats,
  type StoreOptions,
} from "@leaf/segment/adapter";
import pg from "pg";
import { DEFAULT_TABLE, quoteTable } from "./leaf-alloc-schema";

/**
 * Options of {@link PostgresSegmentStore}. Give `url`, or `hosts` (with user, password, database).
 */
export interface PostgresSegmentStoreOptions extends StoreOptions<PostgresHost> {
  /**
   * `postgres://user:password@host:5432/leaf`, `jdbc:postgresql://host:5432/leaf`, or several hosts
   * `postgres://user:pw@primary:5432,standby:5432/leaf`. Query parameters are ignored (TLS and
   * other client settings go in `poolOptions`).
   */
  url?: string;
  /** Hosts in failover order; used instead of the URL's hosts. */
  hosts?: PostgresHost[];
  /** Overrides the URL's user. */
  user?: string;
  /** Overrides the URL's password. */
  password?: string;
  /** Overrides the URL's database. */
  database?: string;
  /**
   * Table name, optionally `schema.table` (default "leaf_alloc"). A name without a schema is in
   * `public`, whoever logs in: never the user's search_path, which puts a schema named after the
   * user first, so that nodes logging in as different users share one table.
   */
  table?: string;
  /** Further pg pool options (ssl, application_name, ...). The store's own settings win. */
  poolOptions?: pg.PoolConfig;
}

/** Counters of a {@link PostgresSegmentStore}, for monitoring and benches. */
export type PostgresStoreStats = HostedStoreStats;

/** What the options describe: one pool per host, and the table. */
export interface HostPools {
  pools: pg.Pool[];
  /** "host:port" of each host, in failover order. */
  hostNames: string[];
  database: string;
  /** `schema.table`: an unqualified name in `public`. */
  tableName: string;
}

/** Checks `options` and builds the pools (no connection is opened yet). */
export function hostPools(options: PostgresSegmentStoreOptions): HostPools {
  const checked = checkStoreOptions(options, {
    parseUrl: (url) => parsePostgresUrl(url, { component: COMPONENT, key: "url" }),
    redactUrl: redactPostgresUrl,
    expectedUrl: "a postgres:// URL",
    defaultPort: 5432,
    defaultTable: DEFAULT_TABLE,
    checkTable: quoteTable,
    tableNamesDatabase: false,
  });
  const { hosts } = checked;
  const tableName = qualifyPostgresTable(checked.tableName);
  const database = checked.database!;
  const pools = hosts.map((h) => {
    const pool = new pg.Pool({
      application_name: "leaf-segment",
      ...options.poolOptions,
      host: h.host,
      port: h.port,
      user: checked.user ?? options.poolOptions?.user,
      password: checked.password ?? options.poolOptions?.password,
      database,
      max: checked.connectionLimit,
      connectionTimeoutMillis: checked.connectTimeoutMs,
      // Client-side: the statement may still run on the server (see the once-only writes).
      query_timeout: checked.queryTimeoutMs,
      keepAlive: true,
      idleTimeoutMillis: 60_000,
    });
    // A connection the server drops is reported as an event, on the pool while idle and on the
    // client while checked out (between two statements of a store call): unheard, the event would
    // end the process. Callers see the failure as the rejection of their next statement.
    pool.on("error", () => {});
    pool.on("connect", (client) => client.on("error", () => {}));
    return pool;
  });
  const hostNames = hosts.map((h) => `${h.host}:${h.port}`);
  return { pools, hostNames, database, tableName };
}
