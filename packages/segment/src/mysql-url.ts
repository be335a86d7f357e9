// Parses the database URLs people already have: mysql://, mariadb:// and Java Leaf's
// jdbc:mysql:// (leaf.jdbc.url), with several comma-separated hosts for failover.
import { configError } from "@leaf/core";
import { COMPONENT } from "./validation";

/** One database server. */
export interface MysqlHost {
  host: string;
  /** Default 3306. */
  port?: number;
}

/** What a URL holds. */
export interface ParsedMysqlUrl {
  hosts: Required<MysqlHost>[];
  user: string | undefined;
  password: string | undefined;
  database: string | undefined;
}

/**
 * Parses `mysql://user:password@host1:3306,host2:3306/database?params` (also `mariadb://` and
 * `jdbc:mysql://`). Query parameters are ignored, so a JDBC URL's `useUnicode=true&...` does no harm;
 * user, password and database may be left out of the URL and given as options.
 */
export function parseMysqlUrl(url: string, key = "url"): ParsedMysqlUrl {
  const match =
    typeof url === "string"
      ? /^(?:jdbc:)?(?:mysql|mariadb):\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/?#]+)(?:\/([^?#]*))?(?:[?#].*)?$/i.exec(
          url.trim(),
        )
      : null;
  const expected =
    "a URL like mysql://user:password@host:3306/leaf, jdbc:mysql://host:3306/leaf or mysql://h1:3306,h2:3306/leaf";
  if (!match) throw configError(COMPONENT, key, redact(url), expected);
  const [, user, password, hostList, database] = match;
  const hosts = hostList!.split(",").map((part) => {
    const hostMatch = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(part.trim());
    const port = hostMatch?.[2] === undefined ? 3306 : Number(hostMatch[2]);
    if (!hostMatch || port < 1 || port > 65_535) {
      throw configError(
        COMPONENT,
        key,
        redact(url),
        `${expected} (host "${part}" is not host[:port])`,
      );
    }
    return { host: hostMatch[1]!.replace(/^\[|\]$/g, ""), port };
  });
  return {
    hosts,
    user: user ? decodeURIComponent(user) : undefined,
    password: password !== undefined ? decodeURIComponent(password) : undefined,
    database: database ? decodeURIComponent(database) : undefined,
  };
}

/** The URL with its password replaced by "***", for messages. */
export function redact(url: unknown): unknown {
  if (typeof url !== "string") return url;
  return url.replace(/(\/\/[^:@/]*:)[^@/]*@/, "$1***@");
}
