// What the MySQL segment store and the MySQL registry entries share: a database as the
// configuration names it (the URL checked, the user and password from their keys or from the URL),
// how it is shown, and MySQL start errors told in the server's keys.
import { parseMysqlUrl } from "@leaf/mysql-support";
import { Expected, text } from "../config-readers";
import type { ConfigValues } from "../config-values";
import {
  type DatabaseErrorStyle,
  type DatabaseKeys,
  type DatabaseSettings,
  databaseSettings,
  databaseTarget,
  explainDatabaseError,
  type ParsedDatabaseUrl,
} from "./database";

const COMPONENT = "server";

/** A MySQL database as the server connects to it. */
export type MysqlSettings = DatabaseSettings;

export const MYSQL_EXAMPLE = "jdbc:mysql://host:3306/leaf";

/** Parses a MySQL URL (several hosts allowed), naming `key` in its error. */
export function parseMysql(url: string, key: string): ParsedDatabaseUrl {
  return parseMysqlUrl(url, { key, component: COMPONENT });
}

/**
 * The settings of the MySQL database at `url`; undefined (with the problems noted) when the URL
 * names no database, or the user or the password is neither set nor in the URL.
 */
export function mysqlSettings(
  v: ConfigValues,
  url: string,
  user: string | undefined,
  password: string | undefined,
  keys: DatabaseKeys,
): MysqlSettings | undefined {
  return databaseSettings(v, { url, user, password }, keys, {
    parse: parseMysql,
    example: MYSQL_EXAMPLE,
  });
}

/** Reads a database URL that @leaf/mysql-support's URL parser accepts. */
export function mysqlUrl(raw: unknown): string {
  const t = text(raw);
  try {
    if (t === undefined) throw new Error("not a string");
    parseMysqlUrl(t);
  } catch {
    throw new Expected(
      "a database URL: jdbc:mysql://host:3306/leaf?..., mysql://user:password@host:3306/leaf or mariadb://...",
    );
  }
  return t;
}

/** "db1:3306,db2:3306/leaf": the hosts and database of a URL, without its user or password. */
export function mysqlTarget(url: string, table?: string): string {
  return databaseTarget(parseMysqlUrl(url), table);
}

/** How MySQL errors read (`details.mysql` is the class @leaf/mysql-support gave it). */
function mysqlStyle(tableFile: string): DatabaseErrorStyle {
  return {
    view(details) {
      if (details.mysql === undefined) return undefined;
      const errno = details.errno;
      return {
        kind: String(details.mysql),
        access:
          errno === 1045
            ? "credentials"
            : errno === 1044
              ? "database"
              : { fix: String(details.fix) },
        unknownDatabase: errno === 1049,
      };
    },
    writable: "SET GLOBAL read_only = OFF",
    tableFile,
  };
}

/** A MySQL error from a store or registry with its fix told in the server's keys. */
export function explainMysqlError(
  error: unknown,
  prefix: "segment.mysql" | "snowflake.mysql",
): unknown {
  return explainDatabaseError(
    error,
    prefix,
    mysqlStyle(prefix === "segment.mysql" ? "sql/leaf_alloc.sql" : "the registry's sql/ file"),
  );
}
