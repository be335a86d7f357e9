// `@leaf/segment-postgres`: the PostgreSQL segment store for @leaf/segment (a leaf_alloc table on
// pg), kept apart so that users of the other stores do not install a database driver.
export {
  type ParsedPostgresUrl,
  type PostgresHost,
  parsePostgresUrl,
  qualifyPostgresTable,
} from "@leaf/postgres-support";
export {
  DEFAULT_TABLE,
  LEAF_ALLOC_SCHEMA,
  leafAllocSchema,
  residueSchema,
  residueTableName,
} from "./leaf-alloc-schema";
export {
  createSchema,
  PostgresSegmentStore,
  type PostgresSegmentStoreOptions,
  type PostgresStoreStats,
} from "./postgres-store";
