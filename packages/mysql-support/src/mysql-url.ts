// Parses the database URLs people already have: mysql://, mariadb:// and Java Leaf's
// jdbc:mysql:// (leaf.jdbc.url), with several comma-separated hosts for failover. Pure: no driver.
import { parseHostListUrl, redactUrl } from "@leaf/core/adapter";

/** One database server. */
export interface MysqlHost {
  host: string;
  /** Default 3306. */
  port?: number;
}

/** What a URL holds. */
export interface ParsedMysqlUrl {
  /** The servers in the order given (failover order), each with its port (3306 when not given). */
  hosts: Required<MysqlHost>[];
  user: string | undefined;
  password: string | undefined;
  database: string | undefined;
}

/** Options of {@link parseMysqlUrl}. */
export interface MysqlUrlOptions {
  /** The config key named in errors (default "url"). */
  key?: string;
  /** The component named in errors (default "core"). */
  component?: string;
}

const EXPECTED =
  "a URL like mysql://user:password@host:3306/leaf, jdbc:mysql://host:3306/leaf or mysql://h1:3306,h2:3306/leaf";

/**
 * Parses `mysql://user:password@host1:3306,host2:3306/database?params` (also `mariadb://` and
 * `jdbc:mysql://`, in any case), with `parseHostListUrl` from @leaf/core/adapter: query parameters
 * ignored, user, password and database percent-decoded, an IPv6 host in brackets. Throws
 * INVALID_CONFIG naming `options.key`, showing the URL with its password hidden.
 */
export function parseMysqlUrl(url: string, options: MysqlUrlOptions = {}): ParsedMysqlUrl {
  return parseHostListUrl(url, {
    schemes: ["mysql", "mariadb"],
    jdbc: true,
    defaultPort: 3306,
    expected: EXPECTED,
    ...options,
  });
}

/**
 * The URL with its password replaced by "***", for messages; other values are returned as they are.
 */
export const redactMysqlUrl: (url: unknown) => unknown = redactUrl;
