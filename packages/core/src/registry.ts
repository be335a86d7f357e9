// The worker-id registry contract: where a snowflake node gets its worker id. Implemented by
// @leaf/registry-zk, -mysql, -postgres, -redis, -etcd, -local and third parties; checked by the
// suite of @leaf/conformance/registry.

/** Who is asking for a worker id. */
export interface NodeIdentity {
  /** The service name (Java Leaf's `leaf.name`): registries keep one worker-id space per name. */
  name: string;
  /** This node's address, as peers see it (Java Leaf: the first non-loopback IPv4). */
  ip: string;
  /** This node's service port. Together with `ip` it identifies the node. */
  port: number;
}

/**
 * A spare worker id leased with the primary one: a backup worker id for clock rollback, which the
 * generator moves to when the clock moves back past its tolerance.
 */
export interface BackupWorker {
  workerId: number;
  /** Highest timestamp (ms since the Unix epoch) ever reported for this id; 0 when never used. */
  lastTimestamp: number;
}

/** What {@link WorkerIdRegistry.acquire} is asked for. */
export interface AcquireRequest {
  node: NodeIdentity;
  /** Largest worker id the generator's layout can hold (2^workerBits - 1). */
  maxWorkerId: number;
  /** How many backup worker ids to lease with the primary one (default 0). */
  backups?: number;
  /**
   * Optional: the one worker id this node must hold (0..maxWorkerId), for example a Kubernetes
   * StatefulSet pod's ordinal. A registry that supports it grants exactly this id, under the same
   * lease as any other, or rejects with WORKER_ID_IN_USE while another holder's lease on it lives;
   * it never grants another id instead. Cannot be combined with `backups`. A registry that does not
   * support it rejects the request with INVALID_ARGUMENT (`checkAcquireRequest` does so unless the
   * registry declares the support), so a requested id is never silently ignored.
   */
  workerId?: number;
  /** Aborts a pending acquire (for example while retrying after a lost lease). */
  signal?: AbortSignal;
}

/**
 * A worker id held by this node.
 *
 * Invariants every registry guarantees while `lost` is not aborted:
 * - no other holder, in any process, has the same `workerId` (or any of the backups);
 * - `lastTimestamp` is at least every timestamp ever reported for this id by any holder, so a
 *   generator that issues ids only after it cannot repeat an id issued earlier under this id;
 * - the stored timestamp never moves backwards: a report lower than the stored one is ignored.
 */
export interface WorkerLease {
  /** The worker id, 0 .. maxWorkerId. */
  readonly workerId: number;
  /**
   * Highest timestamp (ms since the Unix epoch) reported for this worker id before this lease was
   * granted; 0 when the id was never used.
   */
  readonly lastTimestamp: number;
  /** Backup worker ids leased with this one, in the order the generator should use them. */
  readonly backups: readonly BackupWorker[];
  /**
   * Aborted once, when the lease is lost (session expired, reports failing past the lease time, the
   * id taken away). `lost.reason` is a LeafError with code LEASE_LOST. After that the holder must
   * not issue ids under this worker id.
   */
  readonly lost: AbortSignal;
  /**
   * Optional: the `performance.now()` instant (ms) after which this node must not issue ids under
   * the lease unless a renewal moves it later. Registries whose leases expire on a timer (lease
   * mode, sessions) set it, so the generator stops on time even when the event loop is too late to
   * run the registry's own fencing timer. Read on every new tick; it may change after each renewal.
   */
  readonly fenceAt?: number;
  /**
   * Optional: the latest timestamp (ms since the Unix epoch, on this node's wall clock) ids may
   * carry under this lease and its backups, as the store last confirmed it: the next holder of
   * these ids starts after it. Registries that store such a horizon (this holder's clock + the
   * lease, at the grant and at every renewal) set it from the grant on and raise it with every
   * renewal the store confirmed; it never moves back. The generator issues nothing timestamped past
   * it, so a wall clock stepped forward (an NTP step, a VM resumed) cannot carry ids into the next
   * holder's time while the monotonic `fenceAt` is still ahead. Read on every new tick, like
   * `fenceAt`.
   */
  readonly horizon?: number;
  /**
   * Optional: the highest timestamp (ms since the Unix epoch) of the primary id stored where its
   * next holder reads it: the grant's `lastTimestamp`, raised as each report is stored (a fixed
   * id's cache file counts once written: the same node restarting reads it). A fixed id (no
   * `horizon`) is held again by the same node restarting, which starts one report period + restart
   * margin after the stored timestamp: SnowflakeWorker issues nothing timestamped past that instant
   * for this one. A lease without it: the worker counts the reports that resolved.
   */
  readonly confirmedTimestamp?: number;
  /**
   * Optional: true when the next holder of these ids may start as soon as this lease ends without
   * waiting out `horizon`, one report period + restart margin after `confirmedTimestamp` (the local
   * registry takes a dead process's lock at once and reads the cache file). SnowflakeWorker then
   * issues nothing timestamped past the earlier of `horizon` and that instant, as for a fixed id.
   */
  readonly successorStartsFromConfirmed?: boolean;
  /**
   * Records the generator's latest timestamp (ms) for the primary id and, optionally, the backups.
   * Called periodically (every 3 s by default). Never moves a stored timestamp backwards. Rejects
   * with a LeafError (UNAVAILABLE) when the backing store cannot be reached; the caller retries at
   * the next period, and the registry decides when failures amount to a lost lease.
   */
  report(timestampMs: number, backups?: readonly BackupWorker[]): Promise<void>;
  /**
   * Writes a final report (when given) and gives the id back as far as the registry's mode allows
   * (a fixed id stays assigned to the node; a recycled one becomes free). Runs after the reports
   * called before it (LeaseCore queues them), which a registry may end early once released.
   * Idempotent.
   */
  release(finalTimestampMs?: number): Promise<void>;
}

/**
 * A source of worker ids. One instance may serve several acquires (tests do this to stand for
 * several nodes); each acquire is independent.
 */
export interface WorkerIdRegistry {
  /**
   * Short name for messages and metrics: "zk", "mysql", "postgres", "redis", "etcd", "local",
   * "memory".
   */
  readonly kind: string;
  /**
   * Grants a worker id to `node`. Rejects with a LeafError: WORKER_IDS_EXHAUSTED when no id in
   * 0..maxWorkerId is available, WORKER_ID_IN_USE when the node's fixed id is held by another live
   * process, UNAVAILABLE when the backing store cannot be reached and no safe fallback exists,
   * CLOCK_BEHIND_LEASE when the registry itself checks the stored timestamp against the clock.
   * With `request.workerId`: WORKER_ID_IN_USE while another holder's lease on that id lives, and
   * INVALID_ARGUMENT from a registry that cannot grant a requested id.
   */
  acquire(request: AcquireRequest): Promise<WorkerLease>;
  /** Stops timers and closes connections. Does not release leases: call `release` first. */
  close(): Promise<void>;
}
