-- The segment table of @leaf/segment-postgres: Java Leaf's columns (biz_tag, max_id, step,
-- description, update_time) in PostgreSQL's types. update_time has no ON UPDATE in PostgreSQL: the
-- store sets it in every statement that changes a row. createSchema() runs the same statement.
-- In public, whoever runs it: the store names its tables with their schema (a table option without
-- one means public), never through the user's search_path.
CREATE TABLE IF NOT EXISTS "public"."leaf_alloc" (
  "biz_tag" varchar(128) NOT NULL DEFAULT '',
  "max_id" bigint NOT NULL DEFAULT 1,
  "step" integer NOT NULL,
  "description" varchar(256) DEFAULT NULL,
  "update_time" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY ("biz_tag")
);
