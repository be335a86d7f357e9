-- The last max id of each tag deleted through @leaf/segment's admin calls, so that a tag created
-- again under the same name starts above every id it handed out. The PostgreSQL store creates it on
-- its first create or delete of a tag (or createSchema()); create it by hand when the store's user
-- may not create tables. Named after the tag table.
CREATE TABLE IF NOT EXISTS "public"."leaf_alloc_deleted" (
  "biz_tag" varchar(128) NOT NULL,
  "max_id" bigint NOT NULL,
  "deleted_at" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY ("biz_tag")
);
