// Parses the database URLs people already have, `scheme://user:password@host1:port,host2:port/name`
// with several comma-separated hosts for failover, for any scheme an adapter names (mysql://,
// postgres://, their JDBC forms). Pure: it knows no driver; @leaf/mysql-support and
// @leaf/postgres-support give it their schemes and default port.
import { configError } from "./errors";

/** What {@link parseHostListUrl} found in a URL. */
export interface ParsedHostListUrl {
  /**
   * The servers in the order given (failover order), each with its port (the default when not
   * given).
   */
  hosts: { host: string; port: number }[];
  user: string | undefined;
  password: string | undefined;
  /** The path after the hosts (the database name), percent-decoded. */
  database: string | undefined;
}

/** How {@link parseHostListUrl} reads and reports a URL. */
export interface HostListUrlRules {
  /** Schemes accepted, in any case, without "://" (e.g. ["mysql", "mariadb"]). */
  schemes: readonly string[];
  /** Whether Java's `jdbc:` prefix is accepted before the scheme. */
  jdbc: boolean;
  /** Port of a host given without one. */
  defaultPort: number;
  /** What a URL looks like, for messages ("a URL like mysql://user:password@host:3306/leaf"). */
  expected: string;
  /** The config key named in errors (default "url"). */
  key?: string;
  /** The component named in errors (default "core"). */
  component?: string;
}

/**
 * Parses `scheme://user:password@host1:port,host2:port/database?params`. Query parameters are
 * ignored (a JDBC URL's `useUnicode=true&...` does no harm); user, password and database may be
 * left out and are percent-decoded; an IPv6 host is written in brackets (`[::1]:3306`) and
 * returned without them. Throws INVALID_CONFIG naming `rules.key`, showing the URL with its
 * password hidden.
 */
export function parseHostListUrl(url: unknown, rules: HostListUrlRules): ParsedHostListUrl {
  const key = rules.key ?? "url";
  const component = rules.component ?? "core";
  const schemes = rules.schemes.map((s) => s.replace(/[^A-Za-z0-9+.-]/g, "")).join("|");
  // The password may hold "@": the host list starts after the last "@" of the authority.
  const pattern = new RegExp(
    `^${rules.jdbc ? "(?:jdbc:)?" : ""}(?:${schemes}):\\/\\/(?:([^:@/]*)(?::([^/]*))?@)?([^/?#@]+)(?:\\/([^?#]*))?(?:[?#].*)?$`,
    "i",
  );
  const match = typeof url === "string" ? pattern.exec(url.trim()) : null;
  if (!match) throw configError(component, key, redactUrl(url), rules.expected);
  const [, user, password, hostList, database] = match;
  const hosts = hostList!.split(",").map((part) => {
    const hostMatch = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(part.trim());
    const port = hostMatch?.[2] === undefined ? rules.defaultPort : Number(hostMatch[2]);
    if (!hostMatch || port < 1 || port > 65_535) {
      throw configError(
        component,
        key,
        redactUrl(url),
        `${rules.expected} (host "${part}" is not host[:port])`,
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
        redactUrl(url),
        `${rules.expected} (the ${what} has a bad %-escape: write "%" as %25)`,
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

/**
 * The URL with its password replaced by "***", for messages; other values are returned as they are.
 */
export function redactUrl(url: unknown): unknown {
  if (typeof url !== "string") return url;
  return url.replace(/(\/\/[^:@/]*:)[^/]*@/, "$1***@");
}
