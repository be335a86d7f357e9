// What the SQL segment stores read back the same way: a tag's row as a TagRecord, and the words
// their errors use for the options an operator changes.
import type { TagRecord } from "./segment-store";

/** A tag's row as the SQL stores select it: bigints as text, the update time in seconds. */
export interface TagRow {
  biz_tag: string;
  max_id: string;
  step: number | string;
  description: string | null;
  /**
   * `update_time` in seconds since the Unix epoch, as a number or decimal text; null if unknown.
   */
  updated: string | number | null;
}

/** The record of a selected row; the max id exact (from text, never through a JS number). */
export function tagRecordOf(row: TagRow): TagRecord {
  const updated =
    row.updated === null || row.updated === undefined ? null : Number(row.updated) * 1000;
  return {
    tag: String(row.biz_tag),
    maxId: BigInt(row.max_id),
    step: Number(row.step),
    description: row.description ?? null,
    updatedAt: updated !== null && Number.isFinite(updated) ? updated : null,
  };
}

/** How an operator fixes a SQL store's configuration, in the options every such store takes. */
export const STORE_FIXES = {
  credentials: "the user and password (the url, or the user / password options)",
  database: "the database (the url's path, or the database option)",
  createTable: "createSchema(), or sql/leaf_alloc.sql and sql/leaf_alloc_deleted.sql",
  server: "the url (or hosts) option",
} as const;
