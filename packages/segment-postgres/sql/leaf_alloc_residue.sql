-- Not part of Java Leaf: the residue record of a database in a residue set (@leaf/segment's
-- ResidueSegmentStore over several independent databases, each handing out only the ids
-- id % delta = remainder, as Didi tinyid's delta and remainder). One row, written by formResidueSet
-- and read after every range the set's store takes. The PostgreSQL store creates it on the first
-- write of the record; create it by hand when the store's user may not create tables. Named after
-- the tag table.
CREATE TABLE IF NOT EXISTS "public"."leaf_alloc_residue" (
  "id" smallint NOT NULL DEFAULT 1,
  "set_id" varchar(64) NOT NULL,
  "member_id" varchar(64) NOT NULL,
  "epoch" integer NOT NULL,
  "delta" integer NOT NULL,
  "remainder" integer NOT NULL,
  "state" varchar(16) NOT NULL,
  "version" bigint NOT NULL,
  "members" text NULL,
  "update_time" timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY ("id"),
  CONSTRAINT "one_row" CHECK ("id" = 1)
);
