// The PostgreSQL worker-id registry: options, their checks and defaults, and the WorkerIdRegistry
// that leases ids from leaf_worker_lease (see postgres-lease.ts).
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
import type pg from "pg";
import { COMPONENT, type Credentials, Database, isPool } from "./database";
import { acquireLeased, type PostgresLease } from "./postgres-lease";
import { checkTableName, DEFAULT_TABLE, grantSequence, lockedSchemaSql } from "./schema";

/** Why a lease still held when the registry closes is lost. */
const CLOSED_WHILE_HELD = "the registry was closed while the lease was held";

/**
 * What the table can hold: leaf_name is varchar(128), holder_ip varchar(127), worker_id a signed
 * integer.
 */
const REQUEST_LIMITS = {
  maxNameLength: 128,
  maxIpLength: 127,
  maxWorkerIdLimit: 2 ** 31 - 1,
  requestedWorkerId: true,
};

/** Options of {@link PostgresRegistry}. */
export interface PostgresRegistryOptions {
  /**
   * Where the database is: `postgres://user:password@host:5432/leaf` (one host: put a proxy or a
   * virtual IP in front of a failover pair). Or give `client`.
   */
  url?: string;
  /** A pg Pool you made and keep (`close()` leaves it open). Or give `url`. */
  client?: pg.Pool;
  /** The user to log in as, over the one in `url` (with `url` only). */
  user?: string;
  /** The password, over the one in `url` (with `url` only; "" logs in without one). */
  password?: string;
  /**
   * pg pool options beside `url`'s (ssl, application_name, ...). What the URL decides is refused
   * here (host, port, database, user, password, connectionString): pg would read the URL's over
   * it. Give `user` and `password` instead.
   */
  poolOptions?: pg.PoolConfig;
  /**
   * Table name, optionally `schema.table` (default leaf_worker_lease); its sequence is
   * `<table>_grant_seq`, in the same schema. A name without a schema is in `public`, whoever logs
   * in: never the user's search_path, which puts a schema named after the user first, so that nodes
   * logging in as different users share one table.
   */
  table?: string;
  /**
   * How long a lease lasts without renewal, in ms, judged by the database's clock (default 60,000).
   * Another node may take the id once it has passed.
   */
  leaseMs?: number;
  /**
   * The holder fences itself this long (ms) before its lease can end, counted on its own monotonic
   * clock from the send time of its last successful renewal (default leaseMs / 5). It must cover
   * the clock-rate difference between node and database over one lease and a pause of the event
   * loop.
   */
  safetyMarginMs?: number;
  /** ms between renewals (default: the smaller of 3,000 and (leaseMs - margin) / 4). */
  renewIntervalMs?: number;
  /**
   * Time limit of each statement and connection attempt, ms (default: the renewal interval, at
   * least 1,000 and at most 5,000).
   */
  queryTimeoutMs?: number;
  /**
   * How far (ms) the clock may be behind the stored timestamp at acquire and still be waited out
   * (default 5; acquire waits up to `max(toleranceMs, safetyMarginMs)` itself); further behind,
   * acquire rejects with CLOCK_BEHIND_LEASE.
   */
  toleranceMs?: number;
  /** Clock read for the start check and the stored horizons (default: the system clock). */
  clock?: Clock;
}

/** Pool options the URL decides: pg reads the URL's over them, even one the URL leaves out. */
const SET_BY_URL = ["connectionString", "host", "port", "database", "user", "password"] as const;

/** What an error shows of a value that may be secret: its type only. */
const hidden = (value: unknown) => `(a ${typeof value}, hidden)`;

/** Checks `poolOptions`: an object, without what the URL decides. */
function checkPoolOptions(poolOptions: unknown): void {
  if (poolOptions === undefined) return;
  if (typeof poolOptions !== "object" || poolOptions === null) {
    throw configError(COMPONENT, "poolOptions", poolOptions, "pg pool options");
  }
  const given = poolOptions as Record<string, unknown>;
  for (const key of SET_BY_URL) {
    const value = given[key];
    if (value === undefined) continue;
    throw configError(
      COMPONENT,
      `poolOptions.${key}`,
      key === "user" || key === "host" || key === "port" || key === "database"
        ? value
        : hidden(value),
      key === "user" || key === "password"
        ? `no ${key} in poolOptions (pg would log in with the URL's instead): give the ${key} option, which overrides the URL's`
        : `no ${key} in poolOptions (pg would use the URL's instead): set it in url`,
    );
  }
}

/** Checks the `user` and `password` options: strings (the user not empty), with `url` only. */
function checkCredentials(options: PostgresRegistryOptions, withClient: boolean): Credentials {
  const { user, password } = options;
  if (user !== undefined && (typeof user !== "string" || user === "")) {
    throw configError(COMPONENT, "user", user, "a non-empty user name");
  }
  if (password !== undefined && typeof password !== "string") {
    throw configError(COMPONENT, "password", hidden(password), "a string");
  }
  if (withClient && (user !== undefined || password !== undefined)) {
    const key = user !== undefined ? "user" : "password";
    throw configError(
      COMPONENT,
      key,
      key === "user" ? user : hidden(password),
      "no user or password beside client (a pool you give logs in as it was made): give url instead of client",
    );
  }
  return { user, password };
}

/**
 * A {@link WorkerIdRegistry} backed by PostgreSQL: worker ids leased for a time judged by the
 * database's clock and recycled when their holder stops renewing. Create the table first with
 * {@link createSchema} (or {@link PostgresRegistry.createSchema}, or the package's sql/ file).
 */
export class PostgresRegistry implements WorkerIdRegistry {
  readonly kind = "postgres";
  /** The table, `schema.table` (`public.leaf_worker_lease` by default). */
  readonly table: string;
  /** The timings after defaults, ms. */
  readonly timings: {
    leaseMs: number;
    safetyMarginMs: number;
    renewIntervalMs: number;
    queryTimeoutMs: number;
  };
  private readonly db: Database;
  private readonly clock: Clock;
  private readonly toleranceMs: number;
  private readonly live = new Set<PostgresLease>();
  private closed = false;

  constructor(options: PostgresRegistryOptions) {
    if (typeof options !== "object" || options === null) {
      throw configError(COMPONENT, "options", options, "{ url or client, ... }");
    }
    this.table = checkTableName(options.table ?? DEFAULT_TABLE);
    this.toleranceMs = nonNegativeMs(COMPONENT, "toleranceMs", options.toleranceMs ?? 5);
    this.clock = options.clock ?? systemClock;
    const { leaseMs, safetyMarginMs, renewIntervalMs } = checkLeaseTimings(COMPONENT, options, {
      leaseMs: 60_000,
    });
    const queryTimeoutMs = positiveMs(
      COMPONENT,
      "queryTimeoutMs",
      options.queryTimeoutMs ?? Math.max(1000, Math.min(5000, renewIntervalMs)),
    );
    this.timings = { leaseMs, safetyMarginMs, renewIntervalMs, queryTimeoutMs };
    const backend = checkBackend<pg.Pool>(options, {
      component: COMPONENT,
      url: "postgres://user:password@host:5432/leaf",
      client: { what: "a pg Pool", is: isPool },
    });
    checkPoolOptions(options.poolOptions);
    const credentials = checkCredentials(options, backend.client !== undefined);
    this.db = new Database({
      ...(backend.client ? { client: backend.client } : { url: backend.url, credentials }),
      poolOptions: options.poolOptions,
      timeoutMs: queryTimeoutMs,
      table: this.table,
      sequence: grantSequence(this.table),
    });
  }

  async acquire(request: AcquireRequest): Promise<PostgresLease> {
    if (this.closed) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.CLOSED,
        message: "registry is closed: create a new PostgresRegistry to acquire again",
      });
    }
    const checked = checkAcquireRequest(COMPONENT, request, REQUEST_LIMITS);
    const lease = await acquireLeased(
      {
        db: this.db,
        table: this.table,
        clock: this.clock,
        toleranceMs: this.toleranceMs,
        ...this.timings,
        forget: (ended) => this.live.delete(ended),
      },
      checked,
    );
    if (this.closed) {
      lease.abandon(CLOSED_WHILE_HELD);
      throw lease.lost.reason;
    }
    this.live.add(lease);
    return lease;
  }

  /**
   * Creates this registry's table and sequence when they do not exist (the package's `schemaSql`);
   * processes running it at once wait for each other.
   */
  async createSchema(): Promise<void> {
    await this.db.query(lockedSchemaSql(this.table), [], `creating ${this.table}`);
  }

  /**
   * Stops renewals and closes connections. Leases still held are not released, but they are lost
   * (`lost` aborts): without renewals nothing keeps another process off their ids. Release them
   * first for a clean hand-over.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const lease of [...this.live]) lease.abandon(CLOSED_WHILE_HELD);
    this.live.clear();
    await this.db.end();
  }
}
