// What the SQL backends (MySQL, PostgreSQL) share: a database as the configuration names it (the
// URL checked, the user and password from their keys or from the URL), how it is shown, and its
// start errors told in the server's keys rather than the library's options ("check
// segment.mysql.username (LEAF_SEGMENT_MYSQL_USERNAME)" where the library says "the user option").
// Each driver's entry says how its URLs parse and its errors read.
import { isLeafError, LeafError } from "@leaf/core";
import { keyText } from "../config-def";
import type { ConfigKey } from "../config-keys";
import type { ConfigValues } from "../config-values";

/** A database as the server connects to it. */
export interface DatabaseSettings {
  url: string;
  user: string | undefined;
  /** "" for no password. */
  password: string;
  table: string | undefined;
  createTable: boolean;
}

/** The keys a database's settings came from, to name in problems. */
export interface DatabaseKeys {
  url: ConfigKey;
  user: ConfigKey;
  password: ConfigKey;
}

/** What a URL holds, as the drivers' parsers answer. */
export interface ParsedDatabaseUrl {
  hosts: ReadonlyArray<{ host: string; port: number }>;
  user: string | undefined;
  password: string | undefined;
  database: string | undefined;
}

/**
 * The settings of the database at `given.url`; undefined (with the problems noted) when the URL
 * names no database, or the user or the password is neither set nor in the URL. `given.which`
 * names the database in the problems when a key lists several ("member 2 (db2:3306/leaf)").
 */
export function databaseSettings(
  v: ConfigValues,
  given: { url: string; user: string | undefined; password: string | undefined; which?: string },
  keys: DatabaseKeys,
  driver: { parse(url: string, key: string): ParsedDatabaseUrl; example: string },
): DatabaseSettings | undefined {
  const of = given.which === undefined ? "" : ` for ${given.which}`;
  let parsed: ParsedDatabaseUrl;
  try {
    parsed = driver.parse(given.url, keys.url);
  } catch (error) {
    v.problem(keys.url, `invalid ${v.label(keys.url)}${of}: ${(error as Error).message}`);
    return undefined;
  }
  let ok = true;
  if (parsed.database === undefined) {
    v.problem(
      keys.url,
      `invalid ${v.label(keys.url)}${of}: the URL names no database; expected ${driver.example} (the path is the database)`,
    );
    ok = false;
  }
  const user = given.user ?? parsed.user;
  if (user === undefined) {
    v.problem(
      keys.user,
      `missing ${v.label(keys.user)}${of}: the database URL has no user, so the user name is needed`,
    );
    ok = false;
  }
  const password = given.password ?? parsed.password;
  if (password === undefined) {
    v.problem(
      keys.password,
      `missing ${v.label(keys.password)}${of}: a database is configured, so its password is needed (set it empty for a user without a password)`,
    );
    ok = false;
  }
  if (!ok) return undefined;
  return { url: given.url, user, password: password!, table: undefined, createTable: false };
}

/** "db1:3306,db2:3306/leaf.leaf_alloc": hosts, database and table, without user or password. */
export function databaseTarget(parsed: ParsedDatabaseUrl, table?: string): string {
  const hosts = parsed.hosts.map((h) => `${h.host}:${h.port}`).join(",");
  const database = parsed.database ?? "";
  const where =
    table === undefined ? database : table.includes(".") ? table : `${database}.${table}`;
  return `${hosts}/${where}`;
}

/** What the server needs to know of a driver's error (from the LeafError's details). */
export interface DatabaseErrorView {
  /** The class the driver's package gave it: unreachable, read-only, access, schema, ... */
  kind: string;
  /**
   * For access errors: a wrong user or password, no rights on the database, or a fix of the
   * driver's own (missing privileges), after which the credentials are still worth checking.
   */
  access?: "credentials" | "database" | { fix: string };
  /** For schema errors: the database itself is missing, rather than a table. */
  unknownDatabase?: boolean;
}

/** How one driver's errors read, and its words for the fixes. */
export interface DatabaseErrorStyle {
  /** The view of a LeafError's details; undefined when the error is not the driver's. */
  view(details: Record<string, unknown>): DatabaseErrorView | undefined;
  /** How to make a read-only server writable: "SET GLOBAL read_only = OFF". */
  writable: string;
  /** Where the table's SQL is: "sql/leaf_alloc.sql". */
  tableFile: string;
}

/**
 * The error with its fix in the keys under `prefix` (`segment.mysql` names `.url`, `.username`,
 * `.password`, `.createTable`); the error as it is when it is not a database error the style knows.
 */
export function explainDatabaseError(
  error: unknown,
  prefix: string,
  style: DatabaseErrorStyle,
): unknown {
  if (!isLeafError(error) || typeof error.details.problem !== "string") return error;
  const view = style.view(error.details);
  if (!view) return error;
  const url = keyText(`${prefix}.url`);
  const credentials = `check ${keyText(`${prefix}.username`)} / ${keyText(`${prefix}.password`)}`;
  let fix: string | undefined;
  switch (view.kind) {
    case "unreachable":
      fix = `check that the server is up and that ${url} names it (host and port)`;
      break;
    case "read-only":
      fix = `point ${url} at the primary, or make the server writable (${style.writable})`;
      break;
    case "access":
      fix =
        view.access === "credentials" || view.access === undefined
          ? credentials
          : view.access === "database"
            ? `check the database in ${url}, or grant the user its rights on it; else ${credentials}`
            : `${view.access.fix}; else ${credentials}`;
      break;
    case "schema":
      fix = view.unknownDatabase
        ? `check the database in ${url}, or create it (CREATE DATABASE ...)`
        : `set ${keyText(`${prefix}.createTable`)} to true to create it at start, or run ${style.tableFile}`;
      break;
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
