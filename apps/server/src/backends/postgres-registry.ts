// The PostgreSQL registry: worker ids leased for a time judged by the database's clock (now()),
// a fencing token per grant, recycled when their holder stops renewing. Its database defaults to
// the PostgreSQL segment store's.
import { def, hideUrlPasswords } from "../config-def";
import { anyText, boolean, integer, nonEmpty, table } from "../config-readers";
import type { RegistryBackend } from "./backend";
import {
  type DatabaseSettings,
  databaseSettings,
  databaseTarget,
  explainDatabaseError,
} from "./database";
import { POSTGRES_EXAMPLE, parsePostgres, postgresErrors, postgresUrl } from "./postgres-shared";

export const POSTGRES_REGISTRY_KEYS = [
  def("snowflake.postgres.url", {
    type: "postgres:// or jdbc:postgresql:// URL",
    defaultText: "segment.postgres.url",
    doc: "PostgreSQL registry: database of its lease table (one host: put a proxy or a virtual IP in front of a failover pair).",
    redact: hideUrlPasswords,
    read: postgresUrl,
  }),
  def("snowflake.postgres.username", {
    type: "string",
    defaultText: "segment.postgres.username, else the URL's user",
    doc: "PostgreSQL registry: user.",
    read: nonEmpty("a user name", 256),
  }),
  def("snowflake.postgres.password", {
    type: "string (may be empty)",
    defaultText: "segment.postgres.password, else the URL's; required",
    doc: "PostgreSQL registry: password (an empty value means no password).",
    secret: true,
    read: anyText,
  }),
  def("snowflake.postgres.table", {
    type: "table name",
    defaultText: "leaf_worker_lease",
    doc: "PostgreSQL registry: its lease table (its sequence is `<table>_grant_seq`).",
    read: table,
  }),
  def("snowflake.postgres.leaseMs", {
    type: "500 to 600,000",
    defaultText: "60000",
    doc: "PostgreSQL registry: how long a lease lasts without renewal, by the database's clock. The holder fences itself at leaseMs - leaseMs / 5 after the send time of its last confirmed renewal.",
    read: integer(500, 600_000),
  }),
  def("snowflake.postgres.createTable", {
    type: "boolean",
    default: false,
    doc: "PostgreSQL registry: create its table and sequence at start when missing.",
    read: boolean,
  }),
] as const;

/** The PostgreSQL registry's settings. */
export interface PostgresRegistrySettings extends DatabaseSettings {
  kind: "postgres";
  leaseMs: number | undefined;
}

export const postgresRegistry: RegistryBackend<
  "postgres",
  PostgresRegistrySettings,
  typeof POSTGRES_REGISTRY_KEYS
> = {
  kind: "postgres",
  keys: POSTGRES_REGISTRY_KEYS,
  addressKeys: ["snowflake.postgres.url"],
  shared: true,
  borrows: ["segment.postgres.url"],
  settings(v) {
    // Its own database keys, else the segment store's; problems name its own keys unless the
    // value came from the segment store's.
    const urlKey = v.named("snowflake.postgres.url")
      ? "snowflake.postgres.url"
      : "segment.postgres.url";
    const url = v.optional(urlKey);
    if (url === undefined) {
      if (!v.named(urlKey)) {
        v.missing(
          "snowflake.postgres.url",
          "the snowflake registry is postgres, so a database URL is needed (snowflake.postgres.url, or segment.postgres.url)",
        );
      }
      return undefined;
    }
    const userKey = v.has("snowflake.postgres.username")
      ? "snowflake.postgres.username"
      : "segment.postgres.username";
    const passwordKey = v.has("snowflake.postgres.password")
      ? "snowflake.postgres.password"
      : "segment.postgres.password";
    const database = databaseSettings(
      v,
      { url, user: v.optional(userKey), password: v.optional(passwordKey) },
      {
        url: urlKey,
        user: v.has(userKey) ? userKey : "snowflake.postgres.username",
        password: "snowflake.postgres.password",
      },
      { parse: parsePostgres, example: POSTGRES_EXAMPLE },
    );
    const hosts = database ? parsePostgres(url, urlKey).hosts : [];
    if (hosts.length > 1) {
      // Failover between listed hosts is the segment store's; a lease table must be one database.
      v.problem(
        urlKey,
        `invalid ${v.label(urlKey)} for the PostgreSQL registry: ${hosts.length} hosts (${hosts.map((h) => `${h.host}:${h.port}`).join(", ")}); the registry takes one host: put a proxy or a virtual IP in front of a failover pair` +
          (urlKey === "segment.postgres.url" ? ", and give it with snowflake.postgres.url" : ""),
      );
      return undefined;
    }
    if (!database) return undefined;
    return {
      kind: "postgres",
      ...database,
      table: v.optional("snowflake.postgres.table"),
      createTable: v.get("snowflake.postgres.createTable"),
      leaseMs: v.optional("snowflake.postgres.leaseMs"),
    };
  },
  leasingChoice: "postgres",
  grantsRequestedId: () => true,
  reuse: () => ({ reused: true, configured: false }),
  async create(settings, { snowflake }) {
    const { PostgresRegistry } = await import("@leaf/registry-postgres");
    const registry = new PostgresRegistry({
      url: settings.url,
      user: settings.user,
      password: settings.password,
      ...(settings.table !== undefined ? { table: settings.table } : {}),
      ...(settings.leaseMs !== undefined ? { leaseMs: settings.leaseMs } : {}),
      toleranceMs: snowflake.toleranceMs,
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
    kind: "postgres",
    mode: "lease",
    target: databaseTarget(parsePostgres(settings.url, "snowflake.postgres.url")),
    shared: true,
  }),
  explainError: (error) =>
    explainDatabaseError(error, "snowflake.postgres", postgresErrors("the registry's sql/ file")),
};
