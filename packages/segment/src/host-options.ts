// The options every SQL segment store takes beside its driver's own: the host list, the pool size,
// the timeouts and the table name, each checked alike (a bad value named, with what is expected).
import { configError } from "@leaf/core";
import { COMPONENT } from "./validation";

/** One database server. */
export interface StoreHost {
  host: string;
  /** Default: the database's port (3306, 5432). */
  port?: number;
}

/** The pool and timing options of a SQL segment store. */
export interface StorePoolOptions {
  /** Connections per host (default 4). */
  connectionLimit?: number;
  /** Time to open a connection before trying the next host, in ms (default 5,000). */
  connectTimeoutMs?: number;
  /**
   * Time a statement may take before the connection is dropped and the next host tried, in ms
   * (default 5,000).
   */
  queryTimeoutMs?: number;
}

/**
 * Checks a host list (from the options or the URL): non-empty, each `{host, port?}` with a port
 * from 1 to 65535. Answers each host with its port (`defaultPort` when not given).
 * @param url the URL as shown in the error for an empty list (its password hidden).
 */
export function checkStoreHosts(
  hosts: readonly StoreHost[] | undefined,
  defaultPort: number,
  url: unknown,
  expected: string,
): Required<StoreHost>[] {
  if (!Array.isArray(hosts) || hosts.length === 0) {
    throw configError(COMPONENT, "url", url, `${expected} or a non-empty hosts list`);
  }
  return hosts.map((h, i) => {
    const port = h?.port ?? defaultPort;
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
    return { host: h.host, port };
  });
}

/** Checks the pool size and timeouts; answers them with their defaults applied. */
export function checkStorePool(options: StorePoolOptions): Required<StorePoolOptions> {
  const connectionLimit = options.connectionLimit ?? 4;
  if (!Number.isInteger(connectionLimit) || connectionLimit < 1) {
    throw configError(COMPONENT, "connectionLimit", connectionLimit, "an integer of at least 1");
  }
  const connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
  const queryTimeoutMs = options.queryTimeoutMs ?? 5_000;
  for (const [key, value] of [
    ["connectTimeoutMs", connectTimeoutMs],
    ["queryTimeoutMs", queryTimeoutMs],
  ] as const) {
    if (!Number.isInteger(value) || value < 1)
      throw configError(COMPONENT, key, value, "a positive integer of ms");
  }
  return { connectionLimit, connectTimeoutMs, queryTimeoutMs };
}

/** How a database names tables, for {@link checkTableName}. */
export interface TableNaming {
  /** Longest name part (MySQL 64, PostgreSQL 63). */
  maxLength: number;
  /** What may qualify a table: "database" (MySQL), "schema" (PostgreSQL). */
  qualifier: string;
}

/**
 * Checks a table name (`name` or `qualifier.name`), refusing anything but letters, digits, `_` and
 * `$`: the name is configuration, never user input, but it is the one thing not passed as a query
 * parameter. Answers its parts, to be quoted by the store.
 */
export function checkTableName(table: unknown, naming: TableNaming): string[] {
  const part = `[A-Za-z0-9_$]{1,${naming.maxLength}}`;
  if (typeof table !== "string" || !new RegExp(`^${part}(\\.${part})?$`).test(table)) {
    throw configError(
      COMPONENT,
      "table",
      table,
      `a table name of letters, digits, _ and $ (1 to ${naming.maxLength} characters), optionally ${naming.qualifier}.table`,
    );
  }
  return table.split(".");
}

/**
 * The name of the table where a store keeps the last max id of each deleted tag: the tag table's
 * name with `_deleted` appended (`leaf_alloc_deleted`), beside it. A separate table, so readers of
 * every row of the tag table (Java Leaf) never see a deleted tag.
 */
export function deletedTableName(table: string, naming: TableNaming): string {
  const name = `${table}_deleted`;
  if (name.split(".").at(-1)!.length > naming.maxLength) {
    throw configError(
      COMPONENT,
      "table",
      table,
      `a table name of at most ${naming.maxLength - 8} characters: the store keeps deleted tags in a table named after it with _deleted appended`,
    );
  }
  return name;
}

/** The options every SQL segment store takes (its driver's own come beside them). */
export interface StoreOptions<Host extends StoreHost> extends StorePoolOptions {
  url?: string;
  hosts?: Host[];
  user?: string;
  password?: string;
  database?: string;
  table?: string;
}

/** What a store's URL parser answers. */
export interface ParsedStoreUrl {
  hosts: Required<StoreHost>[];
  user: string | undefined;
  password: string | undefined;
  database: string | undefined;
}

/** How {@link checkStoreOptions} reads one database's options. */
export interface StoreOptionRules {
  /** Parses the `url` option (throws INVALID_CONFIG naming it). */
  parseUrl: (url: string) => ParsedStoreUrl;
  /** Hides the password of a URL shown in an error. */
  redactUrl: (url: unknown) => unknown;
  /** What a URL looks like ("a mysql:// URL"). */
  expectedUrl: string;
  defaultPort: number;
  defaultTable: string;
  /** Checks a table name (the store's quoting), throwing INVALID_CONFIG naming `table`. */
  checkTable: (table: string) => void;
  /** Whether a `qualifier.table` name may stand in for the database (MySQL: yes). */
  tableNamesDatabase: boolean;
}

/** A SQL store's options, checked, with the URL's values under the options' own. */
export interface CheckedStoreOptions extends Required<StorePoolOptions> {
  hosts: Required<StoreHost>[];
  user: string | undefined;
  password: string | undefined;
  database: string | undefined;
  tableName: string;
}

/**
 * Checks a SQL store's options: `url` or `hosts` (the options' user, password and database over
 * the URL's), the table name, the pool size and timeouts. Throws INVALID_CONFIG naming the key.
 */
export function checkStoreOptions<Host extends StoreHost>(
  options: StoreOptions<Host>,
  rules: StoreOptionRules,
): CheckedStoreOptions {
  if (!options || typeof options !== "object") {
    throw configError(COMPONENT, "options", options, "{url} or {hosts, user, password, database}");
  }
  const parsed = options.url === undefined ? undefined : rules.parseUrl(options.url);
  const hosts = checkStoreHosts(
    options.hosts ?? parsed?.hosts,
    rules.defaultPort,
    rules.redactUrl(options.url),
    rules.expectedUrl,
  );
  const database = options.database ?? parsed?.database;
  const tableName = options.table ?? rules.defaultTable;
  rules.checkTable(tableName);
  if (
    (database === undefined || database === "") &&
    !(rules.tableNamesDatabase && tableName.includes("."))
  ) {
    throw configError(
      COMPONENT,
      "database",
      database,
      "a database name (in the URL path or the database option)",
    );
  }
  return {
    hosts,
    user: options.user ?? parsed?.user,
    password: options.password ?? parsed?.password,
    database,
    tableName,
    ...checkStorePool(options),
  };
}
