// The PostgreSQL segment store: a leaf_alloc table on PostgreSQL, a range taken in one
// UPDATE ... RETURNING, shared by every server of the deployment.
import {
  DEFAULT_TABLE,
  PostgresSegmentStore,
  parsePostgresUrl,
  qualifyPostgresTable,
} from "@leaf/segment-postgres";
import { def, hideUrlPasswords } from "../config-def";
import { anyText, boolean, nonEmpty, table } from "../config-readers";
import type { StoreBackend } from "./backend";
import {
  type DatabaseSettings,
  databaseSettings,
  databaseTarget,
  explainDatabaseError,
} from "./database";
import { POSTGRES_EXAMPLE, parsePostgres, postgresErrors, postgresUrl } from "./postgres-shared";

export const POSTGRES_STORE_KEYS = [
  def("segment.postgres.url", {
    type: "postgres:// or jdbc:postgresql:// URL",
    defaultText: "(none)",
    doc: "PostgreSQL database of the `leaf_alloc` table; several comma-separated hosts fail over (a second writable one is refused as a split brain). Query parameters are ignored.",
    redact: hideUrlPasswords,
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
      { parse: parsePostgres, example: POSTGRES_EXAMPLE },
    );
    if (!database) return undefined;
    return {
      kind: "postgres",
      ...database,
      table: v.optional("segment.postgres.table"),
      createTable: v.get("segment.postgres.createTable"),
    };
  },
  build: (settings) =>
    new PostgresSegmentStore({
      url: settings.url,
      user: settings.user,
      password: settings.password,
      table: settings.table,
    }),
  async open(settings) {
    const store = postgresStore.build!(settings) as PostgresSegmentStore;
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
  // The database, schema and table without the hosts: a failover to another listed host is still
  // judged by the marks taken before. A table without a schema is public's, as the store reads it.
  storeId(settings) {
    const database = parsePostgresUrl(settings.url).database ?? "";
    return `postgres:${database}.${qualifyPostgresTable(settings.table ?? DEFAULT_TABLE)}`;
  },
  describe: (settings) => ({
    kind: "postgres",
    mode: "",
    target: databaseTarget(parsePostgresUrl(settings.url), settings.table ?? DEFAULT_TABLE),
    shared: true,
  }),
  explainError: (error) =>
    explainDatabaseError(
      error,
      "segment.postgres",
      postgresErrors("@leaf/segment-postgres's sql/leaf_alloc.sql"),
    ),
};
