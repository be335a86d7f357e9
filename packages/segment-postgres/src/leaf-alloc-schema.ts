// The leaf_alloc table on PostgreSQL: Java Leaf's columns (biz_tag, max_id, step, description,
// update_time) in PostgreSQL's types, and the deleted tags' and residue tables beside it, all in
// `public` unless the name gives a schema. The same text ships as sql/leaf_alloc.sql,
// sql/leaf_alloc_deleted.sql and sql/leaf_alloc_residue.sql.
import { qualifyPostgresTable } from "@leaf/postgres-support";
import {
  checkTableName,
  deletedTableName as sharedDeletedTableName,
  residueTableName as sharedResidueTableName,
} from "@leaf/segment/adapter";

/** The default table name, as in Java Leaf. */
export const DEFAULT_TABLE = "leaf_alloc";

/** How PostgreSQL names tables: up to 63 bytes a part (NAMEDATALEN - 1), `schema.table`. */
const POSTGRES_NAMING = { maxLength: 63, qualifier: "schema" };

/**
 * The `CREATE TABLE` statement of the `leaf_alloc` table (with `IF NOT EXISTS`), for the given
 * table name. `update_time` has no `ON UPDATE` in PostgreSQL: every statement of the store that
 * changes a row sets it.
 */
export function leafAllocSchema(table: string = DEFAULT_TABLE): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteTable(table)} (
  "biz_tag" varchar(128) NOT NULL DEFAULT '',
  "max_id" bigint NOT NULL DEFAULT 1,
  "step" integer NOT NULL,
  "description" varchar(256) DEFAULT NULL,
  "update_time" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY ("biz_tag")
)`;
}

/**
 * The name of the table where the store keeps the last max id of each deleted tag: the tag table's
 * name with `_deleted` appended (`leaf_alloc_deleted`), in the same schema.
 */
export function deletedTableName(table: string = DEFAULT_TABLE): string {
  return sharedDeletedTableName(table, POSTGRES_NAMING);
}

/**
 * The `CREATE TABLE` statement of the deleted tags' table (see {@link deletedTableName}): one row
 * per deleted tag, its max id when it was last deleted. A tag is created again only at or above it.
 */
export function deletedTagsSchema(table: string = DEFAULT_TABLE): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteTable(deletedTableName(table))} (
  "biz_tag" varchar(128) NOT NULL,
  "max_id" bigint NOT NULL,
  "deleted_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY ("biz_tag")
)`;
}

/**
 * The name of the table where a database of a residue set keeps its residue record (see
 * `ResidueSegmentStore` of @leaf/segment): the tag table's name with `_residue` appended
 * (`leaf_alloc_residue`), in the same schema.
 */
export function residueTableName(table: string = DEFAULT_TABLE): string {
  return sharedResidueTableName(table, POSTGRES_NAMING);
}

/**
 * The residue table's `members` column: the member ids of the record's epoch, as JSON text. Every
 * row the store writes has them; a row without them is refused as not written by this version.
 */
export const MEMBERS_COLUMN = '"members" text NULL';

/**
 * The `CREATE TABLE` statement of the residue table (see {@link residueTableName}): one row, the
 * database's residue class in its set (tinyid's `delta` and `remainder`), written by
 * `formResidueSet` and read after every range a residue set's store takes.
 */
export function residueSchema(table: string = DEFAULT_TABLE): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteTable(residueTableName(table))} (
  "id" smallint NOT NULL DEFAULT 1,
  "set_id" varchar(64) NOT NULL,
  "member_id" varchar(64) NOT NULL,
  "epoch" integer NOT NULL,
  "delta" integer NOT NULL,
  "remainder" integer NOT NULL,
  "state" varchar(16) NOT NULL,
  "version" bigint NOT NULL,
  ${MEMBERS_COLUMN},
  "update_time" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY ("id"),
  CONSTRAINT "one_row" CHECK ("id" = 1)
)`;
}

/** The schema with the default table name. */
export const LEAF_ALLOC_SCHEMA: string = leafAllocSchema();

/**
 * Quotes a table name (`name` or `schema.name`) for SQL, refusing anything but letters, digits, `_`
 * and `$` (see `checkTableName`). Quoted, the name keeps its case: `Leaf_Alloc` is not
 * `leaf_alloc`. An unqualified name is quoted in `public` (`"public"."leaf_alloc"`), whatever the
 * connecting user's search_path: nodes logging in as different users use one table.
 */
export function quoteTable(table: string): string {
  checkTableName(table, POSTGRES_NAMING);
  return qualifyPostgresTable(table)
    .split(".")
    .map((part) => `"${part}"`)
    .join(".");
}
