// What the MySQL segment store and the MySQL registry entries share: a database as the
// configuration names it (the URL checked, the user and password from their keys or from the URL),
// how it is shown, and MySQL start errors told in the server's keys.
import { isLeafError, LeafError } from "@leaf/core";
import { parseMysqlUrl } from "@leaf/mysql-support";
import { keyText } from "../config-def";
import type { ConfigKey } from "../config-keys";
import { Expected, text } from "../config-readers";
import type { ConfigValues } from "../config-values";

const COMPONENT = "server";

/** A MySQL database as the server connects to it. */
export interface MysqlSettings {
  url: string;
  user: string | undefined;
  /** "" for no password. */
  password: string;
  table: string | undefined;
  createTable: boolean;
}

/** The keys a database's settings came from, to name in problems. */
export interface MysqlKeys {
  url: ConfigKey;
  user: ConfigKey;
  password: ConfigKey;
}

/**
 * The settings of the database at `url`; undefined (with the problems noted) when the URL names no
 * database, or the user or the password is neither set nor in the URL.
 */
export function mysqlSettings(
  v: ConfigValues,
  url: string,
  user: string | undefined,
  password: string | undefined,
  keys: MysqlKeys,
): MysqlSettings | undefined {
  let parsed: ReturnType<typeof parseMysqlUrl>;
  try {
    parsed = parseMysqlUrl(url, { key: keys.url, component: COMPONENT });
  } catch (error) {
    v.problem(keys.url, `invalid ${v.label(keys.url)}: ${(error as Error).message}`);
    return undefined;
  }
  let ok = true;
  if (parsed.database === undefined) {
    v.problem(
      keys.url,
      `invalid ${v.label(keys.url)}: the URL names no database; expected jdbc:mysql://host:3306/leaf (the path is the database)`,
    );
    ok = false;
  }
  const finalUser = user ?? parsed.user;
  if (finalUser === undefined) {
    v.problem(
      keys.user,
      `missing ${v.label(keys.user)}: the database URL has no user, so the user name is needed`,
    );
    ok = false;
  }
  const finalPassword = password ?? parsed.password;
  if (finalPassword === undefined) {
    v.problem(
      keys.password,
      `missing ${v.label(keys.password)}: a database is configured, so its password is needed (set it empty for a user without a password)`,
    );
    ok = false;
  }
  if (!ok) return undefined;
  return { url, user: finalUser, password: finalPassword!, table: undefined, createTable: false };
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
  const parsed = parseMysqlUrl(url);
  const hosts = parsed.hosts.map((h) => `${h.host}:${h.port}`).join(",");
  const database = parsed.database ?? "";
  const where =
    table === undefined ? database : table.includes(".") ? table : `${database}.${table}`;
  return `${hosts}/${where}`;
}

/**
 * A MySQL error from a store or registry with its fix told in the server's keys rather than the
 * library's options (`details.mysql` is the class @leaf/mysql-support gave it).
 */
export function explainMysqlError(
  error: unknown,
  prefix: "segment.mysql" | "snowflake.mysql",
): unknown {
  if (!isLeafError(error) || typeof error.details.problem !== "string") return error;
  const table = prefix === "segment.mysql" ? "sql/leaf_alloc.sql" : "the registry's sql/ file";
  const credentials = `check ${keyText(`${prefix}.username`)} / ${keyText(`${prefix}.password`)}`;
  const fixes: Record<string, string> = {
    unreachable: `check that the server is up and that ${keyText(`${prefix}.url`)} names it (host and port)`,
    "read-only": `point ${keyText(`${prefix}.url`)} at the primary, or make the server writable (SET GLOBAL read_only = OFF)`,
  };
  const kind = String(error.details.mysql);
  const errno = error.details.errno;
  let fix = fixes[kind];
  if (kind === "access") {
    fix =
      errno === 1045
        ? credentials
        : errno === 1044
          ? `check the database in ${keyText(`${prefix}.url`)}, or grant the user its rights on it; else ${credentials}`
          : `${String(error.details.fix)}; else ${credentials}`;
  } else if (kind === "schema") {
    fix =
      errno === 1049
        ? `check the database in ${keyText(`${prefix}.url`)}, or create it (CREATE DATABASE ...)`
        : `set ${keyText(`${prefix}.createTable`)} to true to create it at start, or run ${table}`;
  }
  if (fix === undefined) return error;
  return new LeafError({
    component: error.component,
    code: error.code,
    leafCode: error.leafCode,
    message: `${error.details.problem}; ${fix}`,
    details: { ...error.details, fix },
    cause: error,
  });
}
