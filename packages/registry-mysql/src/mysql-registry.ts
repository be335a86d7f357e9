// The MySQL worker-id registry: options, their checks and defaults, and the two modes behind one
// WorkerIdRegistry. Fixed mode is the Java fork's table; lease mode recycles ids (see
// lease-mode.ts).
import { homedir } from "node:os";
import { join } from "node:path";
import {
  type AcquireRequest,
  type Clock,
  configError,
  ErrorCodes,
  LeafError,
  systemClock,
  type WorkerIdRegistry,
} from "@leaf/core";
import {
  checkAcquireRequest,
  checkBackend,
  checkLeaseTimings,
  nonNegativeMs,
  positiveMs,
} from "@leaf/core/adapter";
import type { Pool, PoolOptions } from "mysql2/promise";
import { COMPONENT, Database, isPool } from "./database";
import type { FixedLease } from "./fixed-lease";
import { acquireFixed } from "./fixed-mode";
import { acquireLeased, type LeasedLease } from "./lease-mode";
import { checkTableName, DEFAULT_TABLES, type RegistryMode, schemaSql } from "./schema";

/**
 * What the tables can hold: leaf_name is varchar(128), ip_port varchar(127) (an ip of up to 120
 * characters, ":" and the port), worker_id a signed INT.
 */
/** Why a lease still held when the registry closes is lost. */
const CLOSED_WHILE_HELD = "the registry was closed while the lease was held";

const REQUEST_LIMITS = { maxNameLength: 128, maxIpLength: 120, maxWorkerIdLimit: 2 ** 31 - 1 };

/** The lease type of a mode: {@link FixedLease} or {@link LeasedLease}. */
export type MysqlLease<M extends RegistryMode> = M extends "fixed"
  ? FixedLease
  : M extends "lease"
    ? LeasedLease
    : FixedLease | LeasedLease;

/** Options of {@link MysqlRegistry}. */
export interface MysqlRegistryOptions<M extends RegistryMode = RegistryMode> {
  /**
   * "fixed": the Java fork's leaf_workerid_alloc, worker id = row id, fixed per ip:port.
   * "lease": leaf_worker_lease, ids leased for `leaseMs` and recycled when their holder goes quiet.
   */
  mode: M;
  /**
   * Where the database is: `mysql://user:password@host:3306/leaf`, or Leaf's
   * `jdbc:mysql://host:3306/leaf?...` (with `user`/`password`; its query parameters are JDBC driver
   * settings and are ignored). Or give `client`.
   */
  url?: string;
  /** A mysql2 promise pool you made and keep (`close()` leaves it open). Or give `url`. */
  client?: Pool;
  /** mysql2 pool options laid over those of `url` (TLS, charset, ...). */
  poolOptions?: PoolOptions;
  /** User name (Leaf's leaf.jdbc.username); overrides the one in the URL. */
  user?: string;
  /** Password (Leaf's leaf.jdbc.password); overrides the one in the URL. */
  password?: string;
  /** Table name (default leaf_workerid_alloc in fixed mode, leaf_worker_lease in lease mode). */
  table?: string;
  /**
   * The other mode's table in the same database (default leaf_worker_lease in fixed mode,
   * leaf_workerid_alloc in lease mode): a worker id in it is refused to this mode.
   */
  otherModeTable?: string;
  /**
   * Lease mode: how long a lease lasts without renewal, in ms, judged by the database's clock
   * (default 60,000). Another node may take the id once it has passed.
   */
  leaseMs?: number;
  /**
   * Lease mode: the holder fences itself this long (ms) before its lease can end, counted on its
   * own monotonic clock from the send time of its last successful renewal (default leaseMs / 5). It
   * must cover the clock-rate difference between node and database over one lease and a pause of
   * the event loop.
   */
  safetyMarginMs?: number;
  /** Lease mode: ms between renewals (default: the smaller of 3,000 and (leaseMs - margin) / 4). */
  renewIntervalMs?: number;
  /**
   * Time limit of each statement and connection attempt, ms (default 5,000; in lease mode at most
   * the renewal interval, at least 1,000).
   */
  queryTimeoutMs?: number;
  /**
   * Fixed mode: folder of the cache files used when MySQL is unreachable at start (default
   * `~/.leaf/registry-mysql`); false disables the fallback. Lease mode has no fallback: see README.
   */
  cacheDir?: string | false;
  /**
   * How far (ms) the clock may be behind the stored timestamp at acquire and still be waited out by
   * the generator; further behind, acquire rejects with CLOCK_BEHIND_LEASE (default 5). Lease mode
   * waits out up to `max(toleranceMs, safetyMarginMs)` itself before it resolves, since an id
   * recycled from a holder whose clock ran a little ahead starts in this clock's future.
   */
  toleranceMs?: number;
  /** Clock read for the start check and the reported horizons (default: the system clock). */
  clock?: Clock;
}

/**
 * A {@link WorkerIdRegistry} backed by MySQL or MariaDB. Create the table first with
 * {@link createSchema} (or {@link MysqlRegistry.createSchema}, or the package's sql/ files).
 */
export class MysqlRegistry<M extends RegistryMode = RegistryMode> implements WorkerIdRegistry {
  readonly kind = "mysql";
  readonly mode: M;
  readonly table: string;
  /** The other mode's table, read to keep both modes off one worker id (see mode-guard.ts). */
  readonly otherModeTable: string;
  /** Lease mode timings after defaults (ms); undefined in fixed mode. */
  readonly timings:
    | { leaseMs: number; safetyMarginMs: number; renewIntervalMs: number; queryTimeoutMs: number }
    | undefined;
  private readonly db: Database;
  private readonly clock: Clock;
  private readonly toleranceMs: number;
  private readonly cacheDir: string | undefined;
  private readonly live = new Set<FixedLease | LeasedLease>();
  private closed = false;

  constructor(options: MysqlRegistryOptions<M>) {
    if (options.mode !== "fixed" && options.mode !== "lease") {
      throw configError(COMPONENT, "mode", options.mode, '"fixed" or "lease"');
    }
    this.mode = options.mode;
    this.table = checkTableName(options.table ?? DEFAULT_TABLES[this.mode]);
    this.otherModeTable = checkTableName(
      options.otherModeTable ?? DEFAULT_TABLES[this.mode === "fixed" ? "lease" : "fixed"],
      "otherModeTable",
    );
    this.toleranceMs = nonNegativeMs(COMPONENT, "toleranceMs", options.toleranceMs ?? 5);
    this.clock = options.clock ?? systemClock;
    let queryTimeoutMs: number;
    if (this.mode === "lease") {
      const { leaseMs, safetyMarginMs, renewIntervalMs } = checkLeaseTimings(COMPONENT, options, {
        leaseMs: 60_000,
      });
      queryTimeoutMs = positiveMs(
        COMPONENT,
        "queryTimeoutMs",
        options.queryTimeoutMs ?? Math.max(1000, Math.min(5000, renewIntervalMs)),
      );
      this.timings = { leaseMs, safetyMarginMs, renewIntervalMs, queryTimeoutMs };
    } else {
      queryTimeoutMs = positiveMs(COMPONENT, "queryTimeoutMs", options.queryTimeoutMs ?? 5000);
      this.timings = undefined;
    }
    if (options.cacheDir === false) this.cacheDir = undefined;
    else if (options.cacheDir === undefined) {
      this.cacheDir = join(homedir(), ".leaf", "registry-mysql");
    } else if (typeof options.cacheDir === "string" && options.cacheDir !== "") {
      this.cacheDir = options.cacheDir;
    } else {
      throw configError(COMPONENT, "cacheDir", options.cacheDir, "a folder path, or false");
    }
    const backend = checkBackend<Pool>(options, {
      component: COMPONENT,
      url: "mysql://user:password@host:3306/leaf, or Leaf's jdbc:mysql://host:3306/leaf",
      client: { what: "a mysql2 promise Pool", is: isPool },
    });
    if (
      options.poolOptions !== undefined &&
      (typeof options.poolOptions !== "object" || options.poolOptions === null)
    ) {
      throw configError(COMPONENT, "poolOptions", options.poolOptions, "mysql2 pool options");
    }
    this.db = new Database({
      ...backend,
      poolOptions: options.poolOptions,
      user: options.user,
      password: options.password,
      timeoutMs: queryTimeoutMs,
    });
  }

  async acquire(request: AcquireRequest): Promise<MysqlLease<M>> {
    if (this.closed) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.CLOSED,
        message: "registry is closed: create a new MysqlRegistry to acquire again",
      });
    }
    // Lease mode can lease a requested id; fixed mode's id is the one its table gives the node.
    const checked = checkAcquireRequest(COMPONENT, request, {
      ...REQUEST_LIMITS,
      requestedWorkerId: this.mode === "lease",
    });
    const forget = (lease: FixedLease | LeasedLease) => this.live.delete(lease);
    const lease =
      this.mode === "fixed"
        ? await acquireFixed(
            {
              db: this.db,
              table: this.table,
              leaseTable: this.otherModeTable,
              clock: this.clock,
              toleranceMs: this.toleranceMs,
              cacheDir: this.cacheDir,
              forget,
            },
            checked,
          )
        : await acquireLeased(
            {
              db: this.db,
              table: this.table,
              fixedTable: this.otherModeTable,
              clock: this.clock,
              toleranceMs: this.toleranceMs,
              ...this.timings!,
              forget,
            },
            checked,
          );
    if (this.closed) {
      lease.abandon(CLOSED_WHILE_HELD);
      throw lease.lost.reason;
    }
    this.live.add(lease);
    return lease as MysqlLease<M>;
  }

  /** Creates this registry's table when it does not exist (the statement of {@link schemaSql}). */
  async createSchema(): Promise<void> {
    await this.db.query(schemaSql(this.mode, this.table), [], `creating ${this.table}`);
  }

  /**
   * Stops renewals and closes connections. Leases still held are not released, but they are lost
   * (`lost` aborts): without renewals (lease mode) or the lock session (fixed mode) nothing keeps
   * another process off their ids. Release them first for a clean hand-over. Ends while MySQL does
   * not answer: statements in flight get up to `queryTimeoutMs`, then their connections are cut.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const lease of [...this.live]) lease.abandon(CLOSED_WHILE_HELD);
    this.live.clear();
    await this.db.end();
  }
}
