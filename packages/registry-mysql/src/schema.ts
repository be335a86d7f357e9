// The two tables: the fork's leaf_workerid_alloc (fixed mode, unchanged so a team migrating from
// the Java fork keeps its worker ids) and leaf_worker_lease (lease mode, ids recycled by the
// database's clock). The package's sql/ files hold the same statements for the default table names.
import { configError } from "@leaf/core";
import { COMPONENT, Database, isPool, type MysqlConnection } from "./database";

/** Which table layout: "fixed" (leaf_workerid_alloc) or "lease" (leaf_worker_lease). */
export type RegistryMode = "fixed" | "lease";

/** Default table of each mode. */
export const DEFAULT_TABLES: Readonly<Record<RegistryMode, string>> = {
  fixed: "leaf_workerid_alloc",
  lease: "leaf_worker_lease",
};

/** Checks a table name (letters, digits, underscores; at most 64) and returns it. */
export function checkTableName(table: unknown, key = "table"): string {
  if (typeof table !== "string" || !/^[A-Za-z0-9_]{1,64}$/.test(table)) {
    throw configError(COMPONENT, key, table, "a table name of letters, digits and _ (at most 64)");
  }
  return table;
}

/**
 * The CREATE TABLE statement of a mode (`CREATE TABLE IF NOT EXISTS`, so running it again is
 * harmless).
 */
export function schemaSql(mode: RegistryMode, table: string = DEFAULT_TABLES[mode]): string {
  const name = checkTableName(table);
  if (mode === "fixed") {
    return `-- @leaf/registry-mysql fixed mode: the Java Leaf fork's table, unchanged.
-- Worker id = id (AUTO_INCREMENT, so ids start at 1), one row per ip:port, never reused.
CREATE TABLE IF NOT EXISTS \`${name}\` (
  \`id\` bigint(20) NOT NULL AUTO_INCREMENT,
  \`ip\` varchar(127) DEFAULT NULL,
  \`port\` varchar(127) DEFAULT NULL,
  \`ip_port\` varchar(127) NOT NULL,
  \`max_timestamp\` bigint(20) DEFAULT NULL,
  \`create_time\` timestamp NULL DEFAULT NULL,
  \`update_time\` timestamp NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (\`id\`),
  UNIQUE KEY \`idx_ipport\` (\`ip_port\`) USING BTREE
) ENGINE=InnoDB;
`;
  }
  if (mode === "lease") {
    return `-- @leaf/registry-mysql lease mode: worker ids leased for a time judged by the database's clock.
-- One row per worker id ever used in a service; a free or expired row is taken by one guarded UPDATE,
-- a never-used id by an INSERT that the primary key decides.
CREATE TABLE IF NOT EXISTS \`${name}\` (
  \`leaf_name\` varchar(128) NOT NULL COMMENT 'service name (leaf.name): one worker id space each',
  \`worker_id\` int NOT NULL COMMENT '0 .. the layout''s largest worker id',
  \`holder\` varchar(191) DEFAULT NULL COMMENT 'token of the lease holding the id; NULL when released',
  \`holder_ip\` varchar(127) NOT NULL DEFAULT '' COMMENT 'last holder''s ip: it gets the id back first',
  \`holder_port\` int NOT NULL DEFAULT 0 COMMENT 'last holder''s port',
  \`lease_until\` datetime(3) DEFAULT NULL COMMENT 'UTC, database clock: the holder owns the id until then',
  \`last_timestamp\` bigint NOT NULL DEFAULT 0 COMMENT 'highest timestamp (ms) reported for the id',
  \`issue_horizon\` bigint NOT NULL DEFAULT 0 COMMENT 'holder clock (ms) + lease at its last renewal: past any id it issues before it fences; 0 after release',
  \`acquired_at\` datetime(3) DEFAULT NULL COMMENT 'UTC, database clock',
  \`updated_at\` datetime(3) DEFAULT NULL COMMENT 'UTC, database clock: last renewal',
  PRIMARY KEY (\`leaf_name\`, \`worker_id\`),
  KEY \`idx_holder\` (\`leaf_name\`, \`holder\`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
`;
  }
  throw configError(COMPONENT, "mode", mode, '"fixed" or "lease"');
}

/** Options of {@link createSchema}. */
export interface CreateSchemaOptions {
  mode: RegistryMode;
  /** Table name (default leaf_workerid_alloc for fixed, leaf_worker_lease for lease). */
  table?: string;
  /** Statement time limit, ms (default 10,000). */
  timeoutMs?: number;
}

/** Creates the table of `mode` when it does not exist. */
export async function createSchema(
  connection: MysqlConnection,
  options: CreateSchemaOptions,
): Promise<void> {
  const sql = schemaSql(options.mode, options.table);
  const database = new Database({
    ...(isPool(connection) ? { client: connection } : { url: connection }),
    timeoutMs: options.timeoutMs ?? 10_000,
  });
  try {
    await database.query(sql, [], `creating the ${options.mode}-mode table`);
  } finally {
    await database.end();
  }
}
