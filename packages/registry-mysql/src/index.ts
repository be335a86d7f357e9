export { isUnreachable, type MysqlConnection } from "./database";
export { FixedLease, fixedCacheFile, fixedLockName } from "./fixed-mode";
export { LeasedLease } from "./lease-mode";
export { type MysqlLease, MysqlRegistry, type MysqlRegistryOptions } from "./mysql-registry";
export {
  type CreateSchemaOptions,
  createSchema,
  DEFAULT_TABLES,
  type RegistryMode,
  schemaSql,
} from "./schema";
