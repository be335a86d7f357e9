// The MySQL registry: the fork's leaf_workerid_alloc table (fixed mode: an id per ip:port, never
// given back) or leased, recycled ids (lease mode). Its database defaults to the segment store's.
import { def, hideUrlPasswords } from "../config-def";
import { anyText, boolean, integer, nonEmpty, oneOf } from "../config-readers";
import type { RegistryBackend } from "./backend";
import {
  explainMysqlError,
  type MysqlSettings,
  mysqlSettings,
  mysqlTarget,
  mysqlUrl,
} from "./mysql-shared";

export const MYSQL_REGISTRY_KEYS = [
  def("snowflake.mysql.url", {
    type: "jdbc:mysql:// or mysql:// URL",
    defaultText: "segment.mysql.url",
    doc: "MySQL registry: database of `leaf_workerid_alloc` (the fork's table).",
    redact: hideUrlPasswords,
    read: mysqlUrl,
  }),
  def("snowflake.mysql.username", {
    type: "string",
    defaultText: "segment.mysql.username",
    doc: "MySQL registry: user.",
    read: nonEmpty("a user name", 256),
  }),
  def("snowflake.mysql.password", {
    type: "string (may be empty)",
    defaultText: "segment.mysql.password; required",
    doc: "MySQL registry: password (an empty value means no password).",
    secret: true,
    read: anyText,
  }),
  def("snowflake.mysql.mode", {
    type: "fixed | lease",
    default: "fixed",
    doc: "fixed: the fork's table, id fixed per ip:port; lease: ids leased and recycled.",
    read: oneOf(["fixed", "lease"] as const),
  }),
  def("snowflake.mysql.leaseMs", {
    type: "500 to 600,000",
    defaultText: "60000",
    doc: "MySQL registry, lease mode: how long a lease lasts without renewal. The holder fences itself at leaseMs - leaseMs / 5 after its last renewal.",
    read: integer(500, 600_000),
  }),
  def("snowflake.mysql.createTable", {
    type: "boolean",
    default: false,
    doc: "MySQL registry: create its table at start when missing.",
    read: boolean,
  }),
] as const;

/** The MySQL registry's settings. */
export interface MysqlRegistrySettings extends MysqlSettings {
  kind: "mysql";
  mode: "fixed" | "lease";
  leaseMs: number | undefined;
}

export const mysqlRegistry: RegistryBackend<
  "mysql",
  MysqlRegistrySettings,
  typeof MYSQL_REGISTRY_KEYS
> = {
  kind: "mysql",
  keys: MYSQL_REGISTRY_KEYS,
  addressKeys: ["snowflake.mysql.url"],
  shared: true,
  borrows: ["segment.mysql.url"],
  settings(v) {
    // Its own database keys, else the segment store's.
    const urlKey = v.named("snowflake.mysql.url") ? "snowflake.mysql.url" : "segment.mysql.url";
    const url = v.optional(urlKey);
    if (url === undefined) {
      if (!v.named(urlKey)) {
        v.missing(
          "snowflake.mysql.url",
          "the snowflake registry is mysql, so a database URL is needed (snowflake.mysql.url, or the segment's leaf.jdbc.url)",
        );
      }
      return undefined;
    }
    const userKey = v.has("snowflake.mysql.username")
      ? "snowflake.mysql.username"
      : "segment.mysql.username";
    const passwordKey = v.has("snowflake.mysql.password")
      ? "snowflake.mysql.password"
      : "segment.mysql.password";
    const settings = mysqlSettings(v, url, v.optional(userKey), v.optional(passwordKey), {
      url: urlKey,
      user: v.has(userKey) ? userKey : "snowflake.mysql.username",
      password: "snowflake.mysql.password",
    });
    if (!settings) return undefined;
    return {
      kind: "mysql",
      mode: v.get("snowflake.mysql.mode"),
      leaseMs: v.optional("snowflake.mysql.leaseMs"),
      ...settings,
      table: undefined,
      createTable: v.get("snowflake.mysql.createTable"),
    };
  },
  leasingChoice: "mysql with snowflake.mysql.mode=lease",
  grantsRequestedId: (settings) => settings.mode === "lease",
  reuse: (settings) => ({
    reused: settings.mode === "lease",
    configured: false,
    instead: "snowflake.mysql.mode=lease",
  }),
  async create(settings, { config, snowflake }) {
    const { MysqlRegistry } = await import("@leaf/registry-mysql");
    const registry = new MysqlRegistry({
      mode: settings.mode,
      ...(settings.leaseMs !== undefined ? { leaseMs: settings.leaseMs } : {}),
      url: settings.url,
      user: settings.user,
      password: settings.password,
      toleranceMs: snowflake.toleranceMs,
      cacheDir: `${config.dataDir}/registry-mysql`,
    });
    if (settings.createTable) {
      try {
        await registry.createSchema();
      } catch (error) {
        await registry.close().catch(() => {});
        throw error;
      }
    }
    return registry;
  },
  describe: (settings) => ({
    kind: "mysql",
    mode: settings.mode,
    target: mysqlTarget(settings.url),
    shared: true,
  }),
  explainError: (error) => explainMysqlError(error, "snowflake.mysql"),
};
