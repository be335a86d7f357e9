// The MySQL store's options: their checks (each bad value named, with what is expected) and the
// pool cluster they describe, one pool per host in failover order. Kept apart from the store, which
// is its range transaction and host failover.
import { type MysqlHost, parseMysqlUrl, redactMysqlUrl } from "@leaf/mysql-support";
import {
  COMPONENT,
  checkStoreOptions,
  type HostedStoreStats,
  type StoreOptions,
} from "@leaf/segment/adapter";
import mysql, { type PoolCluster, type PoolOptions } from "mysql2/promise";
import { DEFAULT_TABLE, quoteTable } from "./leaf-alloc-schema";

/** Options of {@link MysqlSegmentStore}. Give `url`, or `hosts` (with user, password, database). */
export interface MysqlSegmentStoreOptions extends StoreOptions<MysqlHost> {
  /**
   * `mysql://user:password@host:3306/leaf`, Java Leaf's `jdbc:mysql://host:3306/leaf?...`, or
   * several hosts `mysql://user:pw@primary:3306,standby:3306/leaf`. Query parameters are ignored.
   */
  url?: string;
  /** Hosts in failover order; used instead of the URL's hosts. */
  hosts?: MysqlHost[];
  /** Overrides the URL's user (Java Leaf: `leaf.jdbc.username`). */
  user?: string;
  /** Overrides the URL's password (Java Leaf: `leaf.jdbc.password`). */
  password?: string;
  /** Overrides the URL's database. */
  database?: string;
  /** Table name, optionally `database.table` (default "leaf_alloc"). */
  table?: string;
  /** Further mysql2 pool options (ssl, charset, ...). The store's own settings win. */
  poolOptions?: PoolOptions;
}

/** Counters of a {@link MysqlSegmentStore}, for monitoring and benches. */
export type MysqlStoreStats = HostedStoreStats;

/** What the options describe: the hosts' pools, and the table. */
export interface HostCluster {
  cluster: PoolCluster;
  /** "host:port" of each host, in failover order. */
  hostNames: string[];
  database: string | undefined;
  tableName: string;
  queryTimeoutMs: number;
}

/** The pool of host `index` in the cluster. */
export function nodeId(index: number): string {
  return `leaf-host-${index}`;
}

/** Checks `options` and builds the pool cluster (no connection is opened yet). */
export function hostCluster(options: MysqlSegmentStoreOptions): HostCluster {
  const checked = checkStoreOptions(options, {
    parseUrl: (url) => parseMysqlUrl(url, { component: COMPONENT, key: "url" }),
    redactUrl: redactMysqlUrl,
    expectedUrl: "a mysql:// URL",
    defaultPort: 3306,
    defaultTable: DEFAULT_TABLE,
    checkTable: quoteTable,
    tableNamesDatabase: true,
  });
  const { hosts, database, tableName, connectionLimit: limit, queryTimeoutMs } = checked;
  const cluster = mysql.createPoolCluster({
    canRetry: false,
    // Never drop a host for good: a restarted primary must be usable again.
    removeNodeErrorCount: Number.MAX_SAFE_INTEGER,
    defaultSelector: "ORDER",
  });
  const hostNames = hosts.map((h) => `${h.host}:${h.port}`);
  hosts.forEach((h, i) => {
    cluster.add(nodeId(i), {
      ...options.poolOptions,
      host: h.host,
      port: h.port,
      user: checked.user ?? options.poolOptions?.user,
      password: checked.password ?? options.poolOptions?.password,
      database,
      connectionLimit: limit,
      connectTimeout: checked.connectTimeoutMs,
      multipleStatements: true,
      supportBigNumbers: true,
      bigNumberStrings: true,
      dateStrings: true,
      enableKeepAlive: true,
      maxIdle: limit,
      idleTimeout: 60_000,
    });
  });
  // The pool cluster reports connection errors as events too; they reach callers as rejections.
  cluster.on("warn", () => {});
  return { cluster, hostNames, database, tableName, queryTimeoutMs };
}
