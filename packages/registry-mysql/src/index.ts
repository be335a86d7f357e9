export { isUnreachable, type MysqlConnection } from "./database";
export { FixedLease } from "./fixed-lease";
export { fixedCacheFile, fixedLockName } from "./fixed-table";
export { LeasedLease } from "./lease-mode";
export { type MysqlLease, MysqlRegistry, type MysqlRegistryOptions } from "./mysql-registry";
export {
  type CreateSchemaOptions,
  createSchema,
  DEFAULT_TABLES,
  type RegistryMode,
  schemaSql,
} from "./schema";
