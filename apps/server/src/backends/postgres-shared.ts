// What the PostgreSQL segment store and the PostgreSQL registry entries share: the URL reader and
// how PostgreSQL errors read (`details.postgres` is the class, `details.sqlState` the SQLSTATE).
import { parsePostgresUrl } from "@leaf/segment-postgres";
import { Expected, text } from "../config-readers";
import type { DatabaseErrorStyle, ParsedDatabaseUrl } from "./database";

export const POSTGRES_EXAMPLE = "postgres://user:password@host:5432/leaf";

/** Parses a PostgreSQL URL (several hosts allowed), naming `key` in its error. */
export function parsePostgres(url: string, key: string): ParsedDatabaseUrl {
  return parsePostgresUrl(url, { key, component: "server" });
}

/** Reads a PostgreSQL URL that @leaf/segment-postgres's parser accepts. */
export function postgresUrl(raw: unknown): string {
  const t = text(raw);
  try {
    if (t === undefined) throw new Error("not a string");
    parsePostgresUrl(t);
  } catch {
    throw new Expected(
      `a database URL: ${POSTGRES_EXAMPLE}, postgresql://h1:5432,h2:5432/leaf or jdbc:postgresql://host:5432/leaf`,
    );
  }
  return t;
}

/** How PostgreSQL errors read; `tableFile` says where the table's SQL is. */
export function postgresErrors(tableFile: string): DatabaseErrorStyle {
  return {
    view(details) {
      if (details.postgres === undefined) return undefined;
      return {
        kind: String(details.postgres),
        access:
          details.sqlState === "42501"
            ? {
                fix: "grant the user SELECT, INSERT, UPDATE, DELETE on the tables and USAGE on their schema",
              }
            : "credentials",
        unknownDatabase: details.sqlState === "3D000",
      };
    },
    writable: "promote it, or ALTER SYSTEM SET default_transaction_read_only = off",
    tableFile,
  };
}
