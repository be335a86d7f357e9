export { isUnreachable } from "./database";
export { PostgresLease } from "./postgres-lease";
export { PostgresRegistry, type PostgresRegistryOptions } from "./postgres-registry";
export { type CreateSchemaOptions, createSchema, DEFAULT_TABLE, schemaSql } from "./schema";
