// Parses the database URLs people already have: mysql://, mariadb:// and Java Leaf's
// jdbc:mysql:// (leaf.jdbc.url), with several comma-separated hosts for failover. Pure: no driver.
import { configError } from "@leaf/core";

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
 * `jdbc:mysql://`, in any case). Query parameters are ignored, so a JDBC URL's `useUnicode=true&...`
 * does no harm; user, password and database may be left out. User, password and database are
 * percent-decoded; an IPv6 host is written in brackets (`[::1]:3306`) and returned without them.
 * Throws INVALID_CONFIG naming `options.key`, showing the URL with its password hidden.
 */
export function parseMysqlUrl(url: string, options: MysqlUrlOptions = {}): ParsedMysqlUrl {
  const key = options.key ?? "url";
  const component = options.component ?? "core";
  const match =
    typeof url === "string"
      ? // The password may hold "@": the host list starts after the last "@" of the authority.
        /^(?:jdbc:)?(?:mysql|mariadb):\/\/(?:([^:@/]*)(?::([^/]*))?@)?([^/?#@]+)(?:\/([^?#]*))?(?:[?#].*)?$/i.exec(
          url.trim(),
        )
      : null;
  if (!match) throw configError(component, key, redactMysqlUrl(url), EXPECTED);
  const [, user, password, hostList, database] = match;
  const hosts = hostList!.split(",").map((part) => {
    const hostMatch = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(part.trim());
    const port = hostMatch?.[2] === undefined ? 3306 : Number(hostMatch[2]);
    if (!hostMatch || port < 1 || port > 65_535) {
      throw configError(
        component,
        key,
        redactMysqlUrl(url),
        `${EXPECTED} (host "${part}" is not host[:port])`,
      );
    }
    return { host: hostMatch[1]!.replace(/^\[|\]$/g, ""), port };
  });
  const decode = (part: string, what: string) => {
    try {
      return decodeURIComponent(part);
    } catch {
      throw configError(
        component,
        key,
        redactMysqlUrl(url),
        `${EXPECTED} (the ${what} has a bad %-escape: write "%" as %25)`,
      );
    }
  };
  return {
    hosts,
    user: user ? decode(user, "user") : undefined,
    password: password !== undefined ? decode(password, "password") : undefined,
    database: database ? decode(database, "database name") : undefined,
  };
}

/** The URL with its password replaced by "***", for messages; other values are returned as they are. */
export function redactMysqlUrl(url: unknown): unknown {
  if (typeof url !== "string") return url;
  return url.replace(/(\/\/[^:@/]*:)[^/]*@/, "$1***@");
}
