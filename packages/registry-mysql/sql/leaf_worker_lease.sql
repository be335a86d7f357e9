-- @leaf/registry-mysql lease mode: worker ids leased for a time judged by the database's clock.
-- One row per worker id ever used in a service; a free or expired row is taken by one guarded UPDATE,
-- a never-used id by an INSERT that the primary key decides.
CREATE TABLE IF NOT EXISTS `leaf_worker_lease` (
  `leaf_name` varchar(128) NOT NULL COMMENT 'service name (leaf.name): one worker id space each',
  `worker_id` int NOT NULL COMMENT '0 .. the layout''s largest worker id',
  `holder` varchar(191) DEFAULT NULL COMMENT 'token of the lease holding the id; NULL when released',
  `holder_ip` varchar(127) NOT NULL DEFAULT '' COMMENT 'last holder''s ip: it gets the id back first',
  `holder_port` int NOT NULL DEFAULT 0 COMMENT 'last holder''s port',
  `lease_until` datetime(3) DEFAULT NULL COMMENT 'UTC, database clock: the holder owns the id until then',
  `last_timestamp` bigint NOT NULL DEFAULT 0 COMMENT 'highest timestamp (ms) reported for the id',
  `issue_horizon` bigint NOT NULL DEFAULT 0 COMMENT 'holder clock (ms) + lease at its last renewal: past any id it issues before it fences; 0 after release',
  `acquired_at` datetime(3) DEFAULT NULL COMMENT 'UTC, database clock',
  `updated_at` datetime(3) DEFAULT NULL COMMENT 'UTC, database clock: last renewal',
  PRIMARY KEY (`leaf_name`, `worker_id`),
  KEY `idx_holder` (`leaf_name`, `holder`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
