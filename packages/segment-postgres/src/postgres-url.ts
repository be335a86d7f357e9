// Parses PostgreSQL URLs as libpq writes them, with several comma-separated hosts for failover:
// postgres://user:password@h1:5432,h2:5432/leaf (also postgresql:// and jdbc:postgresql://).
import { parseHostListUrl, redactUrl } from "@leaf/core/adapter";
import { COMPONENT } from "@leaf/segment/adapter";

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

const EXPECTED =
  "a URL like postgres://user:password@host:5432/leaf, jdbc:postgresql://host:5432/leaf or postgres://h1:5432,h2:5432/leaf";

/**
 * Parses `postgres://user:password@host1:5432,host2:5432/database?params` (also `postgresql://` and
 * `jdbc:postgresql://`, in any case). Query parameters are ignored: give TLS and other client
 * settings as `poolOptions`. Throws INVALID_CONFIG naming `key`, the password hidden.
 */
export function parsePostgresUrl(url: string, key = "url"): ParsedPostgresUrl {
  return parseHostListUrl(url, {
    schemes: ["postgres", "postgresql"],
    jdbc: true,
    defaultPort: 5432,
    expected: EXPECTED,
    component: COMPONENT,
    key,
  });
}

/** The URL with its password replaced by "***", for messages. */
export const redactPostgresUrl: (url: unknown) => unknown = redactUrl;
