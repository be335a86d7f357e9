// Parses PostgreSQL URLs as libpq writes them, with several comma-separated hosts for failover:
// postgres://user:password@h1:5432,h2:5432/leaf (also postgresql:// and jdbc:postgresql://). Pure:
// no driver.
import { parseHostListUrl, redactUrl } from "@leaf/core/adapter";

/** One PostgreSQL server. */
export interface PostgresHost {
  host: string;
  /** Default 5432. */
  port?: number;
}

/** What a URL holds. */
export interface ParsedPostgresUrl {
  /** The servers in the order given (failover order), each with its port (5432 when not given). */
  hosts: Required<PostgresHost>[];
  user: string | undefined;
  password: string | undefined;
  database: string | undefined;
}

/** Options of {@link parsePostgresUrl}. */
export interface PostgresUrlOptions {
  /** The config key named in errors (default "url"). */
  key?: string;
  /** The component named in errors (default "core"). */
  component?: string;
  /** What the error says is expected (default: a postgres:// URL, with one or several hosts). */
  expected?: string;
}

const EXPECTED =
  "a URL like postgres://user:password@host:5432/leaf, jdbc:postgresql://host:5432/leaf or postgres://h1:5432,h2:5432/leaf";

/**
 * Parses `postgres://user:password@host1:5432,host2:5432/database?params` (also `postgresql://`
 * and `jdbc:postgresql://`, in any case), with `parseHostListUrl` from @leaf/core/adapter: query
 * parameters ignored, user, password and database percent-decoded, an IPv6 host in brackets.
 * Throws INVALID_CONFIG naming `options.key`, showing the URL with its password hidden.
 */
export function parsePostgresUrl(url: string, options: PostgresUrlOptions = {}): ParsedPostgresUrl {
  return parseHostListUrl(url, {
    schemes: ["postgres", "postgresql"],
    jdbc: true,
    defaultPort: 5432,
    key: options.key,
    component: options.component,
    expected: options.expected ?? EXPECTED,
  });
}

/**
 * The URL with its password replaced by "***", for messages; other values are returned as they are.
 */
export const redactPostgresUrl: (url: unknown) => unknown = redactUrl;
