// `@leaf/segment-mysql`: the MySQL segment store for @leaf/segment (Java Leaf's leaf_alloc table on
// mysql2), kept apart so that users of the embedded store do not install a database driver.
export { type MysqlHost, type ParsedMysqlUrl, parseMysqlUrl } from "@leaf/mysql-support";
export {
  DEFAULT_TABLE,
  LEAF_ALLOC_SCHEMA,
  leafAllocSchema,
  residueSchema,
  residueTableName,
} from "./leaf-alloc-schema";
export {
  createSchema,
  MysqlSegmentStore,
  type MysqlSegmentStoreOptions,
  type MysqlStoreStats,
} from "./mysql-store";
