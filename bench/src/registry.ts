// `pnpm bench registry [ROW...]`: per worker-id registry and mode, against a real private server,
// with the registry's default settings: acquire and renewal latency, then how long a holder takes
// to stop issuing ids after its link to the store is cut (a TCP proxy), beside the documented
// bound, and when a second node, connected directly, gets the same worker id.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  isLeafError,
  layouts,
  type NodeIdentity,
  SnowflakeWorker,
  type WorkerIdRegistry,
} from "@leaf/core";
import { EtcdRegistry } from "@leaf/registry-etcd";
import { LocalRegistry } from "@leaf/registry-local";
import { createSchema, MysqlRegistry } from "@leaf/registry-mysql";
import { createSchema as createPostgresSchema, PostgresRegistry } from "@leaf/registry-postgres";
import { RedisRegistry } from "@leaf/registry-redis";
import { ZookeeperRegistry, type ZookeeperRegistryOptions } from "@leaf/registry-zk";
import {
  type EtcdHandle,
  type MysqlHandle,
  type PostgresHandle,
  type RedisHandle,
  startEtcd,
  startMysql,
  startPostgres,
  startRedis,
  startZookeeper,
  TcpProxy,
  type ZookeeperHandle,
} from "@leaf/testkit";
import { type BenchRow, report } from "./_report";

/** Acquire+release cycles, and report round trips, measured per row (after WARMUP untimed ones). */
const CYCLES = Number(process.env.BENCH_CYCLES ?? 200);
const WARMUP = 5;
/** How long a row with no fence (or no takeover) is watched after the cut. */
const WATCH_MS = Number(process.env.BENCH_WATCH_MS ?? 20_000);
/** How long past the watch a node that got the id is waited for to issue its first id. */
const HOLD_ON_MS = 30_000;
/** Pause between the second node's acquire attempts during the cut. */
const RETRY_MS = 50;
const LAYOUT = layouts.leaf;

const holderNode = (name: string): NodeIdentity => ({ name, ip: "10.0.0.1", port: 8080 });
const otherNode = (name: string): NodeIdentity => ({ name, ip: "10.0.0.2", port: 8080 });

interface Servers {
  zk: ZookeeperHandle;
  mysql: MysqlHandle;
  postgres: PostgresHandle;
  redis: RedisHandle;
  etcd: EtcdHandle;
}

/** How one registry/mode is built, and what its documentation promises after a cut. */
interface Case {
  name: string;
  /** The settings used, as the README states them (defaults unless said). */
  settings: string;
  /** The server it uses (none for local). */
  server?: keyof Servers;
  /** A registry on the server at 127.0.0.1:`port` (the proxy's for the cut-off holder). */
  make(at: { port: number }, name: string): Promise<WorkerIdRegistry>;
  /** The documented fence bound after a cut, ms from the cut; undefined when none is promised. */
  fenceBoundMs?: number;
  /**
   * "pool": the id is recycled, so the second node (another ip:port) asks for exactly the
   * holder's id (maxWorkerId = that id, the holder having taken id 0 of a fresh name);
   * "node": the id belongs to the ip:port, so the second node asks as the same ip:port.
   */
  contest?: "pool" | "node";
  /** What one `lease.report()` does in this registry (the renewal column measures it). */
  renewal: string;
  /** What the documentation says about the cut, for the note under the table (none for local). */
  documented?: string;
  /** Why there is no cut (local). */
  noCut?: string;
}

const scratch = mkdtempSync(join(tmpdir(), "leaf-bench-registry-"));
let registrySerial = 0;
/** A folder of its own for each registry instance's cache or lock files. */
const ownDir = () => join(scratch, String(registrySerial++));

function cases(s: Servers): Case[] {
  const zk = (mode: "normal" | "recycle", extra: Partial<ZookeeperRegistryOptions> = {}) =>
    async function make(at: { port: number }) {
      const dir = ownDir();
      return new ZookeeperRegistry({
        url: `127.0.0.1:${at.port}`,
        mode,
        ...(mode === "normal"
          ? { cacheFile: join(dir, "workerID.json"), javaCacheFile: false }
          : {}),
        ...extra,
      });
    };
  const mysqlDbs = new Map<string, Promise<string>>();
  /** One database per name and mode: the fixed table has no service column. */
  const mysqlDb = (mode: "fixed" | "lease", name: string) => {
    let db = mysqlDbs.get(`${mode}/${name}`);
    if (!db) {
      db = s.mysql.createDatabase(`bench_${mode}`).then(async (database) => {
        await createSchema(s.mysql.urlFor(database), { mode });
        return database;
      });
      mysqlDbs.set(`${mode}/${name}`, db);
    }
    return db;
  };
  const mysqlUrl = (port: number, database: string) => `mysql://root@127.0.0.1:${port}/${database}`;
  /** One database for every PostgreSQL registry: the table keeps each service name apart. */
  let postgresDb: Promise<string> | undefined;
  const postgresUrl = async (port: number) => {
    postgresDb ??= s.postgres.createDatabase("bench_lease").then(async (database) => {
      await createPostgresSchema(s.postgres.urlFor(database));
      return database;
    });
    return `postgres://${s.postgres.user}@127.0.0.1:${port}/${await postgresDb}`;
  };
  return [
    {
      name: "local",
      renewal:
        "one atomic rewrite of the cache file (temp file, fsync, rename); the lock heartbeat is a separate timer",
      settings: "LocalRegistry({ workerId: 1, dir }), staleAfterMs 10,000",
      make: async () => new LocalRegistry({ workerId: 1, dir: ownDir() }),
      noCut:
        "no store to cut: the id comes from configuration and a lock file on local disk. Its " +
        "fenceAt (last heartbeat + staleAfterMs / 2 = 5 s) guards a holder that is paused, not cut off",
    },
    {
      name: "zk normal",
      renewal:
        "compare-and-set of the forever node's timestamp + the cache file rewrite (Java Leaf's renewal is this report)",
      documented:
        'no fence by default: ids keep flowing without a session (README "When the session is lost"); a same-ip:port process gets the id once ZooKeeper expires the session',
      settings: "session 6,000 ms, stopWithoutSession false (defaults)",
      server: "zk",
      make: zk("normal"),
      contest: "node",
    },
    {
      name: "zk normal, stopWithoutSession",
      renewal: "as zk normal",
      documented:
        "fenceAt = send of the last write the leader answered + silenceLimitMs; the lease is not lost (it reattaches), the generator refuses ids",
      settings: "session 6,000 ms, silenceLimitMs 4,000 (defaults), stopWithoutSession true",
      server: "zk",
      make: zk("normal", { stopWithoutSession: true }),
      fenceBoundMs: 4000,
      contest: "node",
    },
    {
      name: "zk recycle",
      renewal:
        "a transaction raising the record and checking the lease node (heartbeat writes run besides, every silenceLimitMs / 12)",
      documented:
        "fenceAt = send of the last write the leader answered + silenceLimitMs; the session expires at least sessionTimeoutMs - silenceLimitMs later",
      settings: "session 6,000 ms, silenceLimitMs 4,000 (defaults)",
      server: "zk",
      make: zk("recycle"),
      fenceBoundMs: 4000,
      contest: "pool",
    },
    {
      name: "mysql fixed",
      renewal: "UPDATE max_timestamp on the lock connection + the cache file rewrite",
      documented:
        "no fence: the id is the ip:port's for good (README Limits: a same-ip:port process started while MySQL dropped a partitioned holder's session runs under the same id)",
      settings: "defaults (cacheDir in a temp folder)",
      server: "mysql",
      make: async (at, name) =>
        new MysqlRegistry({
          mode: "fixed",
          url: mysqlUrl(at.port, await mysqlDb("fixed", name)),
          cacheDir: ownDir(),
        }),
      contest: "node",
    },
    {
      name: "mysql lease",
      renewal: "the renewal UPDATE guarded by the holder token (a report is a renewal)",
      documented:
        "fences at leaseMs - safetyMarginMs after the send of its last successful renewal; the row expires leaseMs after the database ran it",
      settings: "leaseMs 60,000, safetyMarginMs 12,000, renewIntervalMs 3,000 (defaults)",
      server: "mysql",
      make: async (at, name) =>
        new MysqlRegistry({ mode: "lease", url: mysqlUrl(at.port, await mysqlDb("lease", name)) }),
      fenceBoundMs: 60_000 - 12_000,
      contest: "pool",
    },
    {
      name: "postgres",
      renewal: "the renewal UPDATE guarded by the grant's fencing token (a report is a renewal)",
      documented:
        "fences at leaseMs - safetyMarginMs after the send of its last successful renewal; the row's lease ends leaseMs after the database ran it (now())",
      settings: "leaseMs 60,000, safetyMarginMs 12,000, renewIntervalMs 3,000 (defaults)",
      server: "postgres",
      make: async (at) => new PostgresRegistry({ url: await postgresUrl(at.port) }),
      fenceBoundMs: 60_000 - 12_000,
      contest: "pool",
    },
    {
      name: "redis",
      renewal: "the renew script guarded by the token (a report is a renewal)",
      documented:
        "fences at leaseMs - safetyMarginMs after the send of the last renewal Redis confirmed; the lease ends leaseMs after Redis ran it",
      settings: "leaseMs 30,000, safetyMarginMs 6,000, renewIntervalMs 3,000 (defaults)",
      server: "redis",
      make: async (at) => new RedisRegistry({ url: `redis://127.0.0.1:${at.port}` }),
      fenceBoundMs: 30_000 - 6_000,
      contest: "pool",
    },
    {
      name: "etcd",
      renewal:
        "the guarded transaction writing the timestamps; a renewal is a keepalive followed by the same kind of transaction",
      documented:
        "fences at TTL - fenceMarginMs after the send of the last confirmed renewal; etcd expires the lease no earlier than TTL after it",
      settings: "leaseTtlSeconds 10, fenceMarginMs 1,000, renewIntervalMs 3,333 (defaults)",
      server: "etcd",
      make: async (at) => new EtcdRegistry({ url: `http://127.0.0.1:${at.port}` }),
      fenceBoundMs: 10_000 - 1000,
      contest: "pool",
    },
  ];
}

/** Nearest-rank percentile of `values` (µs), rounded to whole µs. */
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round(sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!);
}

/** Acquire+release cycles, then report round trips on one held lease, on a registry of its own. */
async function latencies(c: Case, port: number, name: string) {
  const registry = await c.make({ port }, name);
  const node = holderNode(name);
  const acquire: number[] = [];
  const renew: number[] = [];
  try {
    for (let i = 0; i < WARMUP + CYCLES; i++) {
      const started = performance.now();
      const lease = await registry.acquire({ node, maxWorkerId: LAYOUT.maxWorkerId });
      if (i >= WARMUP) acquire.push((performance.now() - started) * 1000);
      await lease.release(Date.now());
    }
    const lease = await registry.acquire({ node, maxWorkerId: LAYOUT.maxWorkerId });
    try {
      for (let i = 0; i < WARMUP + CYCLES; i++) {
        const started = performance.now();
        await lease.report(Date.now());
        if (i >= WARMUP) renew.push((performance.now() - started) * 1000);
      }
    } finally {
      await lease.release(Date.now());
    }
  } finally {
    await registry.close();
  }
  return {
    acquireP50Micros: percentile(acquire, 50),
    acquireP99Micros: percentile(acquire, 99),
    renewP50Micros: percentile(renew, 50),
    renewP99Micros: percentile(renew, 99),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Settles `promise` or gives up after `ms` (cleanup after a cut must not hang the bench). */
function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return Promise.race([promise.catch(() => undefined), sleep(ms).then(() => undefined)]);
}

interface CutResult {
  fenceAfterCutMs: number | null;
  lostAfterCutMs: number | null;
  lastIdAfterCutMs: number | null;
  otherAcquiredAfterCutMs: number | null;
  otherFirstIdAfterCutMs: number | null;
  holderIds: number;
  otherIds: number;
  duplicateIds: number;
}

/**
 * A holder (a snowflake worker) on a registry behind a TCP proxy issues an id every ms; the proxy
 * cuts the link; the holder keeps trying to issue while a second node, a snowflake worker on a
 * registry straight to the server, tries to start on the same worker id every RETRY_MS and, once
 * started, issues an id every ms too. Every id of both goes into one set: a repeat is a duplicate.
 */
async function cutOff(c: Case, serverPort: number, name: string): Promise<CutResult> {
  const proxy = await TcpProxy.start({ targetPort: serverPort });
  const held = await c.make({ port: proxy.port }, name);
  const other = await c.make({ port: serverPort }, name);
  let holder: SnowflakeWorker | undefined;
  let contender: SnowflakeWorker | undefined;
  let contending: Promise<void> | undefined;
  const ids = new Set<bigint>();
  let duplicateIds = 0;
  const keep = (id: bigint) => {
    if (ids.has(id)) duplicateIds++;
    ids.add(id);
  };
  try {
    holder = new SnowflakeWorker({ registry: held, node: holderNode(name), reacquire: false });
    await holder.start();
    const lease = holder.lease!;
    const workerId = lease.workerId;
    if (c.contest === "pool" && workerId !== 0) {
      throw new Error(`${c.name}: the holder of a fresh name got worker id ${workerId}, not 0`);
    }
    // Steady: ids flowing, the first report (after 1 s) and a few renewals done.
    const steadyUntil = performance.now() + 4500;
    while (performance.now() < steadyUntil) {
      keep(holder.nextId());
      await sleep(1);
    }
    if (holder.lastReportAt === 0) {
      throw new Error(`${c.name}: no report went through before the cut`);
    }

    let lostAt: number | undefined;
    lease.lost.addEventListener("abort", () => {
      lostAt ??= performance.now();
    });
    let lastIdAt: number | undefined;
    let refusedAt: number | undefined;
    let otherAt: number | undefined;
    let otherFirstIdAt: number | undefined;
    let holderIds = 0;
    let otherIds = 0;
    // The second node asks for exactly the holder's id: as the same ip:port when the id belongs to
    // the ip:port, else as another node with the pool narrowed to that one id.
    const narrowed: WorkerIdRegistry = {
      kind: other.kind,
      acquire: async (request) => {
        const got = await other.acquire(
          c.contest === "pool"
            ? { ...request, maxWorkerId: workerId }
            : { ...request, node: holderNode(name) },
        );
        otherAt = performance.now();
        return got;
      },
      close: () => other.close(),
    };

    proxy.cutOff();
    const cutAt = performance.now();
    const watchUntil = cutAt + Math.max(WATCH_MS, (c.fenceBoundMs ?? 0) + 15_000);
    contending = (async () => {
      while (performance.now() < watchUntil) {
        try {
          const worker = new SnowflakeWorker({
            registry: narrowed,
            node: otherNode(name),
            reacquire: false,
          });
          await worker.start();
          contender = worker;
          if (contender.lease?.workerId !== workerId) {
            throw new Error(
              `${c.name}: the second node got worker id ${contender.lease?.workerId}, not ${workerId}`,
            );
          }
          return;
        } catch (error) {
          if (!isLeafError(error)) throw error;
          otherAt = undefined; // acquired, then refused at start: not a takeover
          await sleep(RETRY_MS);
        }
      }
    })();
    // Both try an id every ms until the other node has issued for 2 s, or the watch ends with no
    // takeover. A node that got the id waits out the old holder's timestamp before its first id
    // (up to the lease + the report period + 1 s): it is given up to HOLD_ON_MS for that.
    for (;;) {
      const now = performance.now();
      if (otherFirstIdAt !== undefined && now > otherFirstIdAt + 2000) break;
      if (now >= watchUntil && (otherAt === undefined || now >= watchUntil + HOLD_ON_MS)) break;
      try {
        keep(holder.nextId());
        holderIds++;
        lastIdAt = performance.now();
      } catch (error) {
        if (!isLeafError(error)) throw error;
        refusedAt ??= performance.now();
      }
      if (contender) {
        keep(contender.nextId());
        otherIds++;
        otherFirstIdAt ??= performance.now();
      }
      await sleep(1);
    }
    const since = (at: number | undefined) => (at === undefined ? null : Math.round(at - cutAt));
    return {
      fenceAfterCutMs: since(refusedAt),
      lostAfterCutMs: since(lostAt),
      lastIdAfterCutMs: since(lastIdAt),
      otherAcquiredAfterCutMs: since(otherAt),
      otherFirstIdAfterCutMs: since(otherFirstIdAt),
      holderIds,
      otherIds,
      duplicateIds,
    };
  } finally {
    proxy.heal();
    await within(contending ?? Promise.resolve(), 15_000);
    if (holder) await within(holder.close(), 15_000);
    if (contender) await within(contender.close(), 15_000);
    await within(held.close(), 15_000);
    await within(other.close(), 15_000);
    await proxy.close();
  }
}

const only = process.argv.slice(2);
const servers: Servers = await (async () => {
  const [zk, mysql, postgres, redis, etcd] = await Promise.all([
    // ZooKeeper's own default tickTime (2 s), as in production; the kit's default is 500 ms.
    startZookeeper({ tickTime: 2000 }),
    startMysql(),
    startPostgres(),
    startRedis(),
    // etcd's own default raft timers (heartbeat 100 ms, election 1,000 ms).
    startEtcd({ heartbeatMs: 100, electionTimeoutMs: 1000 }),
  ]);
  return { zk, mysql, postgres, redis, etcd };
})();

const rows: BenchRow[] = [];
const notes: string[] = [];
try {
  for (const [index, c] of cases(servers).entries()) {
    if (only.length > 0 && !only.some((o) => c.name.startsWith(o))) continue;
    const port = c.server ? servers[c.server].port : 0;
    const name = `bench.${process.pid}.${index}`;
    console.log(`${c.name}: ${CYCLES} acquire+release cycles, ${CYCLES} reports`);
    const latency = await latencies(c, port, `${name}.latency`);
    const row: BenchRow = { name: c.name, ...latency };
    if (c.noCut) {
      notes.push(`${c.name} (${c.settings}). Renewal: ${c.renewal}. Fence n/a: ${c.noCut}.`);
      Object.assign(row, {
        fenceAfterCutMs: null,
        fenceBoundMs: null,
        lastIdAfterCutMs: null,
        otherAcquiredAfterCutMs: null,
        duplicateIds: null,
      });
    } else {
      console.log(`${c.name}: holder cut off from its server`);
      const cut = await cutOff(c, port, `${name}.cut`);
      Object.assign(row, {
        fenceAfterCutMs: cut.fenceAfterCutMs,
        fenceBoundMs: c.fenceBoundMs ?? null,
        lastIdAfterCutMs: cut.lastIdAfterCutMs,
        otherAcquiredAfterCutMs: cut.otherAcquiredAfterCutMs,
        duplicateIds: cut.duplicateIds,
      });
      notes.push(
        `${c.name} (${c.settings}). Renewal: ${c.renewal}. Documented: ${c.documented}. ` +
          "Measured: " +
          (cut.fenceAfterCutMs === null
            ? `the holder never refused an id (still issuing at ${cut.lastIdAfterCutMs} ms, when the watch ended)`
            : `the holder refused ids from ${cut.fenceAfterCutMs} ms`) +
          `, lease.lost ${cut.lostAfterCutMs === null ? "not aborted" : `at ${cut.lostAfterCutMs} ms`}, ` +
          `${cut.holderIds} ids after the cut; ` +
          (cut.otherAcquiredAfterCutMs === null
            ? "the other node did not get the id"
            : `the other node got the id at ${cut.otherAcquiredAfterCutMs} ms, issued ` +
              (cut.otherFirstIdAfterCutMs === null
                ? "none while watched"
                : `from ${cut.otherFirstIdAfterCutMs} ms (${cut.otherIds} ids)`)) +
          `; ${cut.duplicateIds} duplicate ids.`,
      );
    }
    rows.push(row);
  }
} finally {
  await Promise.all(Object.values(servers).map((server) => server.dispose()));
  rmSync(scratch, { recursive: true, force: true });
}

report(
  "registry",
  rows,
  [
    `Private servers on loopback from @leaf/testkit (ZooKeeper tickTime 2,000 ms, MariaDB, PostgreSQL, Redis, ` +
      `etcd heartbeat 100 / election 1,000 ms); each registry with its own defaults. acquire: ` +
      `${CYCLES} acquire+release cycles, one node; renew: ${CYCLES} lease.report() round trips. ` +
      `Cut: the holder's TCP proxy drops every byte (connections stay open) while a second ` +
      `registry, straight to the server, asks for the same worker id every ${RETRY_MS} ms; times ` +
      `in ms from the cut, one trial each. fenceAfterCutMs: the holder's first refused id; ` +
      `lastIdAfterCutMs: its last issued id; otherAcquiredAfterCutMs: the second node's acquire ` +
      `resolved; both nodes then issue an id every ms, and duplicateIds counts ids issued twice.`,
    ...notes,
  ].join("\n"),
);
