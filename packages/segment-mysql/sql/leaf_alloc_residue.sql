-- Not part of Java Leaf: the residue record of a database in a residue set (@leaf/segment's
-- ResidueSegmentStore over several independent databases, each handing out only the ids
-- id % delta = remainder, as Didi tinyid's delta and remainder). One row, written by formResidueSet
-- and read after every range the set's store takes. The MySQL store creates it on the first write
-- of the record; create it by hand when the store's user may not create tables. Named after the
-- tag table.
CREATE TABLE IF NOT EXISTS `leaf_alloc_residue` (
  `id` tinyint(4) NOT NULL DEFAULT '1',
  `set_id` varchar(64) NOT NULL,
  `member_id` varchar(64) NOT NULL,
  `epoch` int(11) NOT NULL,
  `delta` int(11) NOT NULL,
  `remainder` int(11) NOT NULL,
  `state` varchar(16) NOT NULL,
  `version` bigint(20) NOT NULL,
  `members` text NULL,
  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (`id`),
  CONSTRAINT `one_row` CHECK (`id` = 1)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
