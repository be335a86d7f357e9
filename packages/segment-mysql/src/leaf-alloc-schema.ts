// Java Leaf's leaf_alloc table, column for column, so that a team moving from Java Leaf points the
// MySQL store at the table it already has. The same text ships as sql/leaf_alloc.sql.
import {
  checkTableName,
  deletedTableName as sharedDeletedTableName,
  residueTableName as sharedResidueTableName,
} from "@leaf/segment/adapter";

/** The default table name, as in Java Leaf. */
export const DEFAULT_TABLE = "leaf_alloc";

/**
 * The `CREATE TABLE` statement of Java Leaf's `leaf_alloc` table (with `IF NOT EXISTS`), for the
 * given table name.
 */
export function leafAllocSchema(table: string = DEFAULT_TABLE): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteTable(table)} (
  \`biz_tag\` varchar(128) NOT NULL DEFAULT '',
  \`max_id\` bigint(20) NOT NULL DEFAULT '1',
  \`step\` int(11) NOT NULL,
  \`description\` varchar(256) DEFAULT NULL,
  \`update_time\` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (\`biz_tag\`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`;
}

/** How MySQL names tables: up to 64 characters a part, `database.table`. */
const MYSQL_NAMING = { maxLength: 64, qualifier: "database" };

/**
 * The name of the table where the store keeps the last max id of each deleted tag: the tag table's
 * name with `_deleted` appended (`leaf_alloc_deleted`), in the same database. A separate table, so
 * Java Leaf, which reads every row of `leaf_alloc`, never sees a deleted tag.
 */
export function deletedTableName(table: string = DEFAULT_TABLE): string {
  return sharedDeletedTableName(table, MYSQL_NAMING);
}

/**
 * The `CREATE TABLE` statement of the deleted-tags table (see {@link deletedTableName}): one row
 * per deleted tag, its max id when it was last deleted. A tag is created again only at or above it.
 */
export function deletedTagsSchema(table: string = DEFAULT_TABLE): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteTable(deletedTableName(table))} (
  \`biz_tag\` varchar(128) NOT NULL,
  \`max_id\` bigint(20) NOT NULL,
  \`deleted_at\` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (\`biz_tag\`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`;
}

/** Java Leaf's schema with the default table name. */
export const LEAF_ALLOC_SCHEMA: string = leafAllocSchema();

/**
 * Quotes a table name (`name` or `database.name`) for SQL, refusing anything but letters, digits,
 * `_` and `$` (see `checkTableName`).
 */
export function quoteTable(table: string): string {
  return checkTableName(table, MYSQL_NAMING)
    .map((part) => `\`${part}\``)
    .join(".");
}

/**
 * The name of the table where a database of a residue set keeps its residue record (see
 * `ResidueSegmentStore` of @leaf/segment): the tag table's name with `_residue` appended
 * (`leaf_alloc_residue`), in the same database. Java Leaf never reads it.
 */
export function residueTableName(table: string = DEFAULT_TABLE): string {
  return sharedResidueTableName(table, MYSQL_NAMING);
}

/**
 * The residue table's `members` column: the member ids of the record's epoch, as JSON text. Every
 * row the store writes has them; a row without them is refused as not written by this version.
 */
export const MEMBERS_COLUMN = "`members` text NULL";

/**
 * The `CREATE TABLE` statement of the residue table (see {@link residueTableName}): one row, the
 * database's residue class in its set (tinyid's `delta` and `remainder`), written by
 * `formResidueSet` and read after every range a residue set's store takes.
 */
export function residueSchema(table: string = DEFAULT_TABLE): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteTable(residueTableName(table))} (
  \`id\` tinyint(4) NOT NULL DEFAULT '1',
  \`set_id\` varchar(64) NOT NULL,
  \`member_id\` varchar(64) NOT NULL,
  \`epoch\` int(11) NOT NULL,
  \`delta\` int(11) NOT NULL,
  \`remainder\` int(11) NOT NULL,
  \`state\` varchar(16) NOT NULL,
  \`version\` bigint(20) NOT NULL,
  ${MEMBERS_COLUMN},
  \`update_time\` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (\`id\`),
  CONSTRAINT \`one_row\` CHECK (\`id\` = 1)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`;
}
