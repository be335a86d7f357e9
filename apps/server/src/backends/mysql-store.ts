// The MySQL segment store: Java Leaf's leaf_alloc table (leaf.jdbc.url and its user and password),
// shared by every server of the deployment.
import { DEFAULT_TABLE, MysqlSegmentStore, parseMysqlUrl } from "@leaf/segment-mysql";
import { def, hideUrlPasswords } from "../config-def";
import { anyText, boolean, nonEmpty, table } from "../config-readers";
import type { StoreBackend } from "./backend";
import {
  explainMysqlError,
  type MysqlSettings,
  mysqlSettings,
  mysqlTarget,
  mysqlUrl,
} from "./mysql-shared";

export const MYSQL_STORE_KEYS = [
  def("segment.mysql.url", {
    aliases: ["leaf.jdbc.url"],
    type: "jdbc:mysql:// or mysql:// URL",
    defaultText: "(none)",
    doc: "Database of the `leaf_alloc` table. A JDBC URL is accepted (its parameters are ignored).",
    redact: hideUrlPasswords,
    read: mysqlUrl,
  }),
  def("segment.mysql.username", {
    aliases: ["leaf.jdbc.username"],
    type: "string",
    defaultText: "the URL's user",
    doc: "Database user.",
    read: nonEmpty("a user name", 256),
  }),
  def("segment.mysql.password", {
    aliases: ["leaf.jdbc.password"],
    type: "string (may be empty)",
    defaultText: "the URL's password; required",
    doc: "Database password. Required when the store is mysql (an empty value means no password).",
    secret: true,
    read: anyText,
  }),
  def("segment.mysql.table", {
    type: "table name",
    defaultText: "leaf_alloc",
    doc: "Table of tags and max ids.",
    read: table,
  }),
  def("segment.mysql.createTable", {
    type: "boolean",
    default: false,
    doc: "Create the table at start when it is missing.",
    read: boolean,
  }),
] as const;

/** The MySQL store's settings. */
export interface MysqlStoreSettings extends MysqlSettings {
  kind: "mysql";
}

export const mysqlStore: StoreBackend<"mysql", MysqlStoreSettings, typeof MYSQL_STORE_KEYS> = {
  kind: "mysql",
  keys: MYSQL_STORE_KEYS,
  addressKeys: ["segment.mysql.url"],
  shared: true,
  settings(v) {
    const url = v.optional("segment.mysql.url");
    if (url === undefined) {
      if (!v.named("segment.mysql.url")) {
        v.missing("segment.mysql.url", "segment.store is mysql, so the database URL is needed");
      }
      return undefined;
    }
    const mysql = mysqlSettings(
      v,
      url,
      v.optional("segment.mysql.username"),
      v.optional("segment.mysql.password"),
      {
        url: "segment.mysql.url",
        user: "segment.mysql.username",
        password: "segment.mysql.password",
      },
    );
    if (!mysql) return undefined;
    return {
      kind: "mysql",
      ...mysql,
      table: v.optional("segment.mysql.table"),
      createTable: v.get("segment.mysql.createTable"),
    };
  },
  build: (settings) =>
    new MysqlSegmentStore({
      url: settings.url,
      user: settings.user,
      password: settings.password,
      table: settings.table,
    }),
  async open(settings) {
    const store = mysqlStore.build!(settings) as MysqlSegmentStore;
    try {
      if (settings.createTable) await store.createSchema();
      // A user without UPDATE, a missing table or a read-only server fails the start here rather
      // than serving 503 on every request.
      await store.checkAccess();
    } catch (error) {
      await store.close().catch(() => {});
      throw error;
    }
    return store;
  },
  // The database and table without the hosts: a failover to another listed host, or the URL
  // pointed at a promoted replica, is still judged by the marks taken before.
  storeId(settings) {
    const table = settings.table ?? DEFAULT_TABLE;
    const qualified = table.includes(".")
      ? table
      : `${parseMysqlUrl(settings.url).database ?? ""}.${table}`;
    return `mysql:${qualified}`;
  },
  describe: (settings) => ({
    kind: "mysql",
    mode: "",
    target: mysqlTarget(settings.url, settings.table ?? DEFAULT_TABLE),
    shared: true,
  }),
  explainError: (error) => explainMysqlError(error, "segment.mysql"),
};
