-- @leaf/registry-postgres: worker ids leased for a time judged by the database's clock.
-- One row per worker id ever used in a service; a free or expired row is taken by one guarded
-- UPDATE, a never-used id by an INSERT that the primary key decides. Every grant takes a fencing
-- token from the sequence; renewals and the release match it. The schema is named (public unless
-- the table option gives one): every node uses this table, whatever user it logs in as.
CREATE SEQUENCE IF NOT EXISTS public.leaf_worker_lease_grant_seq;
CREATE TABLE IF NOT EXISTS public.leaf_worker_lease (
  leaf_name varchar(128) NOT NULL,
  worker_id integer NOT NULL,
  grant_token bigint,
  holder_ip varchar(127) NOT NULL DEFAULT '',
  holder_port integer NOT NULL DEFAULT 0,
  lease_until timestamptz,
  last_timestamp bigint NOT NULL DEFAULT 0,
  issue_horizon bigint NOT NULL DEFAULT 0,
  acquired_at timestamptz,
  updated_at timestamptz,
  PRIMARY KEY (leaf_name, worker_id)
);
COMMENT ON TABLE public.leaf_worker_lease IS 'worker ids of @leaf/registry-postgres, leased by the database clock';
COMMENT ON COLUMN public.leaf_worker_lease.leaf_name IS 'service name (leaf.name): one worker id space each';
COMMENT ON COLUMN public.leaf_worker_lease.worker_id IS '0 .. the layout''s largest worker id';
COMMENT ON COLUMN public.leaf_worker_lease.grant_token IS 'fencing token of the grant holding the id (from public.leaf_worker_lease_grant_seq); NULL when released';
COMMENT ON COLUMN public.leaf_worker_lease.holder_ip IS 'last holder''s ip: it gets the id back first';
COMMENT ON COLUMN public.leaf_worker_lease.lease_until IS 'database clock: the holder owns the id until then';
COMMENT ON COLUMN public.leaf_worker_lease.last_timestamp IS 'highest timestamp (ms) reported for the id';
COMMENT ON COLUMN public.leaf_worker_lease.issue_horizon IS 'holder clock (ms) + lease at its last renewal: past any id it issues before it fences; 0 after release';
