// The PostgreSQL segment store: a leaf_alloc table on PostgreSQL, a range taken in one
// UPDATE ... RETURNING, shared by every server of the deployment.
import { DEFAULT_TABLE, PostgresSegmentStore, parsePostgresUrl } from "@leaf/segment-postgres";
import { def } from "../config-def";
import { anyText, boolean, Expected, nonEmpty, table, text } from "../config-readers";
import type { StoreBackend } from "./backend";
import {
  type DatabaseErrorStyle,
  type DatabaseSettings,
  databaseSettings,
  databaseTarget,
  explainDatabaseError,
} from "./database";

const EXAMPLE = "postgres://user:password@host:5432/leaf";

/** Reads a PostgreSQL URL that @leaf/segment-postgres's parser accepts. */
function postgresUrl(raw: unknown): string {
  const t = text(raw);
  try {
    if (t === undefined) throw new Error("not a string");
    parsePostgresUrl(t);
  } catch {
    throw new Expected(
      `a database URL: ${EXAMPLE}, postgresql://h1:5432,h2:5432/leaf or jdbc:postgresql://host:5432/leaf`,
    );
  }
  return t;
}

export const POSTGRES_STORE_KEYS = [
  def("segment.postgres.url", {
    type: "postgres:// or jdbc:postgresql:// URL",
    defaultText: "(none)",
    doc: "PostgreSQL database of the `leaf_alloc` table; several comma-separated hosts fail over (a second writable one is refused as a split brain). Query parameters are ignored.",
    read: postgresUrl,
  }),
  def("segment.postgres.username", {
    type: "string",
    defaultText: "the URL's user",
    doc: "PostgreSQL user.",
    read: nonEmpty("a user name", 256),
  }),
  def("segment.postgres.password", {
    type: "string (may be empty)",
    defaultText: "the URL's password; required",
    doc: "PostgreSQL password. Required when the store is postgres (an empty value means no password).",
    secret: true,
    read: anyText,
  }),
  def("segment.postgres.table", {
    type: "table name",
    defaultText: "leaf_alloc",
    doc: "Table of tags and max ids, optionally `schema.table`.",
    read: table,
  }),
  def("segment.postgres.createTable", {
    type: "boolean",
    default: false,
    doc: "Create the table (and its deleted-tags table) at start when missing.",
    read: boolean,
  }),
] as const;

/** The PostgreSQL store's settings. */
export interface PostgresStoreSettings extends DatabaseSettings {
  kind: "postgres";
}

/** How PostgreSQL errors read (`details.postgres` is the class, `details.sqlState` the SQLSTATE). */
const POSTGRES_ERRORS: DatabaseErrorStyle = {
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
  tableFile: "@leaf/segment-postgres's sql/leaf_alloc.sql",
};

export const postgresStore: StoreBackend<
  "postgres",
  PostgresStoreSettings,
  typeof POSTGRES_STORE_KEYS
> = {
  kind: "postgres",
  keys: POSTGRES_STORE_KEYS,
  addressKeys: ["segment.postgres.url"],
  shared: true,
  settings(v) {
    const url = v.optional("segment.postgres.url");
    if (url === undefined) {
      if (!v.named("segment.postgres.url")) {
        v.missing(
          "segment.postgres.url",
          "segment.store is postgres, so the database URL is needed",
        );
      }
      return undefined;
    }
    const database = databaseSettings(
      v,
      {
        url,
        user: v.optional("segment.postgres.username"),
        password: v.optional("segment.postgres.password"),
      },
      {
        url: "segment.postgres.url",
        user: "segment.postgres.username",
        password: "segment.postgres.password",
      },
      { parse: parsePostgresUrl, example: EXAMPLE },
    );
    if (!database) return undefined;
    return {
      kind: "postgres",
      ...database,
      table: v.optional("segment.postgres.table"),
      createTable: v.get("segment.postgres.createTable"),
    };
  },
  async open(settings) {
    const store = new PostgresSegmentStore({
      url: settings.url,
      user: settings.user,
      password: settings.password,
      table: settings.table,
    });
    try {
      if (settings.createTable) await store.createSchema();
      // A user without UPDATE, a missing table or a standby fails the start here.
      await store.checkAccess();
    } catch (error) {
      await store.close().catch(() => {});
      throw error;
    }
    return store;
  },
  // The database and table without the hosts: a failover to another listed host is still judged
  // by the marks taken before.
  storeId(settings) {
    const table = settings.table ?? DEFAULT_TABLE;
    const qualified = table.includes(".")
      ? table
      : `${parsePostgresUrl(settings.url).database ?? ""}.${table}`;
    return `postgres:${qualified}`;
  },
  describe: (settings) => ({
    kind: "postgres",
    mode: "",
    target: databaseTarget(parsePostgresUrl(settings.url), settings.table ?? DEFAULT_TABLE),
    shared: true,
  }),
  explainError: (error) => explainDatabaseError(error, "segment.postgres", POSTGRES_ERRORS),
};
