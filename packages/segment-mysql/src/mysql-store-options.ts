// The MySQL store's options: their checks (each bad value named, with what is expected) and the
// pool cluster they describe, one pool per host in failover order. Kept apart from the store, which
// is its range transaction and host failover.
import { configError } from "@leaf/core";
import { type MysqlHost, parseMysqlUrl, redactMysqlUrl } from "@leaf/mysql-support";
import { COMPONENT } from "@leaf/segment/adapter";
import mysql, { type PoolCluster, type PoolOptions } from "mysql2/promise";
import { DEFAULT_TABLE, quoteTable } from "./leaf-alloc-schema";

/** Options of {@link MysqlSegmentStore}. Give `url`, or `hosts` (with user, password, database). */
export interface MysqlSegmentStoreOptions {
  /**
   * `mysql://user:password@host:3306/leaf`, Java Leaf's `jdbc:mysql://host:3306/leaf?...`, or several
   * hosts `mysql://user:pw@primary:3306,standby:3306/leaf`. Query parameters are ignored.
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
  /** Connections per host (default 4). */
  connectionLimit?: number;
  /** Time to open a connection before trying the next host, in ms (default 5,000). */
  connectTimeoutMs?: number;
  /** Time a statement may take before the connection is dropped and the next host tried, in ms (default 5,000). */
  queryTimeoutMs?: number;
  /** Further mysql2 pool options (ssl, charset, ...). The store's own settings win. */
  poolOptions?: PoolOptions;
}

/** Counters of a {@link MysqlSegmentStore}, for monitoring and benches. */
export interface MysqlStoreStats {
  /** Statements sent to a server (a range is one). */
  roundTrips: number;
  /** Ranges taken. */
  rangesTaken: number;
  /** Times the store moved to another host (failure or read-only). */
  failovers: number;
  /**
   * Ranges refused because another listed host was writable too (a split brain): taken on one host
   * and never handed out. Non-zero means two servers take writes: alert on it.
   */
  splitBrainRefusals: number;
  /**
   * Ranges refused because the row was damaged or the max id was behind a range this store already
   * took (moved back, or a stale primary after a failover); nothing was changed on the server.
   */
  rangeRefusals: number;
  /** Give-backs made (the max id set back to the first unused id). */
  givenBack: number;
  /** Give-backs not made because a range was taken after the one given back (nothing changed). */
  giveBacksRefused: number;
  /**
   * Writes that set a value (give-back, create, step change, delete) sent once and never answered
   * (a timeout, a lost connection): not sent again, since a copy may still run on the server.
   */
  writesUnanswered: number;
  /** Index in the host list of the host in use. */
  currentHost: number;
  hosts: string[];
}

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
  if (!options || typeof options !== "object") {
    throw configError(COMPONENT, "options", options, "{url} or {hosts, user, password, database}");
  }
  const parsed =
    options.url === undefined
      ? undefined
      : parseMysqlUrl(options.url, { component: COMPONENT, key: "url" });
  const hosts = options.hosts ?? parsed?.hosts;
  if (!Array.isArray(hosts) || hosts.length === 0) {
    throw configError(
      COMPONENT,
      "url",
      redactMysqlUrl(options.url),
      "a mysql:// URL or a non-empty hosts list",
    );
  }
  for (const [i, h] of hosts.entries()) {
    const port = h?.port ?? 3306;
    if (
      !h ||
      typeof h.host !== "string" ||
      h.host.length === 0 ||
      !Number.isInteger(port) ||
      port < 1 ||
      port > 65_535
    ) {
      throw configError(COMPONENT, `hosts[${i}]`, h, "{host: string, port?: 1..65535}");
    }
  }
  const database = options.database ?? parsed?.database;
  const tableName = options.table ?? DEFAULT_TABLE;
  quoteTable(tableName);
  if (database === undefined && !tableName.includes(".")) {
    throw configError(
      COMPONENT,
      "database",
      undefined,
      "a database name (in the URL path or the database option)",
    );
  }
  const limit = options.connectionLimit ?? 4;
  if (!Number.isInteger(limit) || limit < 1) {
    throw configError(COMPONENT, "connectionLimit", limit, "an integer of at least 1");
  }
  const connectTimeout = options.connectTimeoutMs ?? 5_000;
  const queryTimeoutMs = options.queryTimeoutMs ?? 5_000;
  for (const [key, value] of [
    ["connectTimeoutMs", connectTimeout],
    ["queryTimeoutMs", queryTimeoutMs],
  ] as const) {
    if (!Number.isInteger(value) || value < 1)
      throw configError(COMPONENT, key, value, "a positive integer of ms");
  }
  const cluster = mysql.createPoolCluster({
    canRetry: false,
    // Never drop a host for good: a restarted primary must be usable again.
    removeNodeErrorCount: Number.MAX_SAFE_INTEGER,
    defaultSelector: "ORDER",
  });
  const hostNames = hosts.map((h) => `${h.host}:${h.port ?? 3306}`);
  hosts.forEach((h, i) => {
    cluster.add(nodeId(i), {
      ...options.poolOptions,
      host: h.host,
      port: h.port ?? 3306,
      user: options.user ?? parsed?.user ?? options.poolOptions?.user,
      password: options.password ?? parsed?.password ?? options.poolOptions?.password,
      database,
      connectionLimit: limit,
      connectTimeout,
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
