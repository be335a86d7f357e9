// The cluster of one family: its stores (private servers of the test kit), a TCP proxy between each
// server and each store it uses (so one link can be cut), a fake clock per server, and the Leaf
// server processes themselves. Faults act on it; the load reads its servers.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import {
  FakeClock,
  freePort,
  type MysqlReplicaPair,
  type PostgresReplicaPair,
  type RedisReplicaSet,
  redisCommand,
  type ServiceHandle,
  startEtcd,
  startMysql,
  startMysqlReplicaPair,
  startPostgres,
  startPostgresReplicaPair,
  startRedis,
  startRedisReplicaSet,
  startZookeeper,
  startZookeeperEnsemble,
  TcpProxy,
  type ZookeeperEnsembleHandle,
} from "@leaf/testkit";
import { LeafProcess, serverCli } from "../leaf-process";
import { type PostgresDatabase, postgresDatabase } from "../postgres-kit";
import { type SegmentDatabase, segmentDatabaseOn } from "../services";
import type { Family } from "./families";
import { formResidueSetOf } from "./family-residue";
import type { History } from "./history";
import { createRedisNamespace } from "./redis-segment";
import { stallWatchEnv } from "./stalls";

/** The stores a family can use. */
export type StoreKind = "mysql" | "zookeeper" | "redis" | "etcd" | "postgres";

type Config = Record<string, unknown>;

/** One Leaf server of a family. */
export interface ServerSpec {
  label: string;
  /** Its configuration; `c.urlOf(label, store)` gives the store's address through its proxy. */
  config(c: Cluster): Config;
  /** The stores it reaches, each through a proxy of its own. */
  links: StoreKind[];
  env?: Record<string, string>;
  /**
   * Not started with the cluster: a fault starts it. "second-pod": a pod with a running pod's
   * StatefulSet ordinal; "standby": one more server competing for a leased worker id;
   * "defaults": a server whose start must be refused; "same-identity": a second process given a
   * running server's `ip:port` (ZooKeeper normal mode; the fault sets its port through `envs`);
   * "give-back-chain": a server with no clients that takes a range at start (the fault of that name).
   */
  spare?: "second-pod" | "standby" | "defaults" | "same-identity" | "give-back-chain";
}

/** The running cluster. */
export class Cluster {
  readonly stores = new Map<StoreKind, ServiceHandle>();
  readonly proxies = new Map<string, TcpProxy>();
  readonly servers = new Map<string, LeafProcess>();
  readonly clocks = new Map<string, FakeClock>();
  /**
   * Each server's environment, read at every start: a takeover sets a standby's HOSTNAME to the
   * pod name whose ordinal is the worker id it asks for; `same-identity` sets its spare's
   * LEAF_SNOWFLAKE_PORT to the holder's port (and its ZooKeeper address to a tap).
   */
  readonly envs = new Map<string, Record<string, string>>();
  /**
   * Promises a fault saw broken outside the history (a server that should have been refused
   * started).
   */
  readonly broken: Array<{ atMs: number; promise: string; text: string }> = [];
  /**
   * The ZooKeeper ensemble of a family that runs one: "zookeeper" is then its first member (the
   * store faults hit it), and server i reaches member i mod 3 through its proxy.
   */
  ensemble: ZookeeperEnsembleHandle | undefined;
  /** The segment database (MariaDB families with tags). */
  db: SegmentDatabase | undefined;
  /**
   * The MariaDB primary and its asynchronous replica of a family with `mysqlReplica`: "mysql" is
   * the primary until a fault promotes the replica (then "mysql" is the replica).
   */
  replicaPair: MysqlReplicaPair | undefined;
  /**
   * The PostgreSQL primary and its streaming replica of a family with `postgresReplica`: "postgres"
   * is the primary until a fault promotes the replica (then "postgres" is the replica).
   */
  postgresPair: PostgresReplicaPair | undefined;
  /** The PostgreSQL database (segment and registry tables; a host list with the replica). */
  pgDb: PostgresDatabase | undefined;
  /**
   * The Redis master and its replica of a family with `redisReplica`: "redis" is the master until a
   * fault promotes the replica (then "redis" is the replica).
   */
  redisSet: RedisReplicaSet | undefined;
  /**
   * Servers left down because every restart was refused (a documented start-up check): from when,
   * until a later start (Infinity while still down).
   */
  readonly down: Array<{ server: string; fromMs: number; toMs: number }> = [];

  constructor(
    readonly dir: string,
    readonly history: History,
    private readonly log: (line: string) => void,
  ) {}

  /**
   * Starts `stores` (in parallel), creates `tags` in a new database when MariaDB or PostgreSQL is
   * one, or in the Redis segment store's namespace with `redisSegment`; with `residue`, forms the
   * databases into a residue set.
   */
  async startStores(
    stores: StoreKind[],
    tags: Array<{ tag: string; step: number }>,
    options: Pick<
      Family,
      | "zkEnsemble"
      | "mysqlReplica"
      | "postgresReplica"
      | "redisReplica"
      | "redisSegment"
      | "redisWaitReplicas"
      | "residue"
    > = {},
  ): Promise<void> {
    const { zkEnsemble, mysqlReplica, postgresReplica, redisReplica } = options;
    const handles = await Promise.all(
      stores.map(async (kind): Promise<[StoreKind, ServiceHandle]> => {
        switch (kind) {
          case "mysql":
            if (mysqlReplica) {
              this.replicaPair = await startMysqlReplicaPair({ semiSync: false });
              return [kind, this.replicaPair.primary];
            }
            return [kind, await startMysql({ useEnv: false })];
          case "zookeeper":
            if (zkEnsemble) {
              // A cut-off follower answers reads for syncLimit ticks (5 s), past the 4 s sessions,
              // as with ZooKeeper's own defaults (tickTime 2 s, syncLimit 5: 10 s).
              this.ensemble = await startZookeeperEnsemble({
                size: 3,
                tickTime: 200,
                syncLimit: 25,
                maxSessionTimeout: 20_000,
              });
              return [kind, this.ensemble.members[0]!];
            }
            return [kind, await startZookeeper({ useEnv: false })];
          case "redis":
            if (redisReplica) {
              this.redisSet = await startRedisReplicaSet({ replicas: 1 });
              return [kind, this.redisSet.master];
            }
            return [kind, await startRedis({ useEnv: false })];
          case "etcd":
            return [kind, await startEtcd({ useEnv: false })];
          case "postgres":
            if (postgresReplica) {
              this.postgresPair = await startPostgresReplicaPair();
              return [kind, this.postgresPair.primary];
            }
            return [kind, await startPostgres({ useEnv: false })];
        }
      }),
    );
    for (const [kind, handle] of handles) this.stores.set(kind, handle);
    const mysql = this.stores.get("mysql");
    if (mysql) this.db = await segmentDatabaseOn(mysql as never, tags);
    await this.replicaPair?.waitForReplica();
    if (options.redisSegment) {
      // With waitReplicas, the marker's write waits for the replica.
      await this.redisSet?.waitInSync();
      await createRedisNamespace(
        this.store("redis").url,
        options.redisSegment,
        tags,
        options.redisWaitReplicas,
      );
      await this.redisSet?.waitInSync();
    }
    const postgres = this.stores.get("postgres");
    if (postgres) {
      this.pgDb = await postgresDatabase(postgres as never, tags, this.postgresPair?.replica);
      await this.postgresPair?.waitForReplica();
    }
    if (options.residue) this.note(`residue set formed: ${await formResidueSetOf(this)}`);
  }

  /** Makes each server's proxies, clock and process (not started). */
  async prepare(specs: ServerSpec[]): Promise<void> {
    const cli = serverCli();
    for (const [index, spec] of specs.entries()) {
      for (const store of spec.links) {
        const members = store === "zookeeper" ? this.ensemble?.members : undefined;
        const handle = members ? members[index % members.length]! : this.store(store);
        this.proxies.set(
          linkName(spec.label, store),
          await TcpProxy.start({ targetPort: handle.port }),
        );
      }
      mkdirSync(this.dir, { recursive: true });
      const clock = new FakeClock({ file: join(this.dir, `${spec.label}.clock`) });
      this.clocks.set(spec.label, clock);
      const env = { ...spec.env, ...stallWatchEnv(this.dir, spec.label) };
      this.envs.set(spec.label, env);
      this.servers.set(
        spec.label,
        new LeafProcess({
          cli,
          label: spec.label,
          dir: this.dir,
          port: await freePort(),
          config: spec.config(this),
          clock,
          env,
          readyTimeoutMs: 30_000,
          stopTimeoutMs: 12_000,
        }),
      );
    }
  }

  /** The store of `kind`, or an error naming it. */
  store(kind: StoreKind): ServiceHandle {
    const handle = this.stores.get(kind);
    if (!handle) throw new Error(`[leaf] [nemesis] this family has no ${kind}`);
    return handle;
  }

  /**
   * After a restart of `kind`: a promoted replica comes back read-only (its configuration says so,
   * as an operator's would until it is changed), so writes are turned on again, as after the
   * promotion.
   */
  async storeRestarted(kind: StoreKind): Promise<void> {
    const pair = this.replicaPair;
    if (kind === "mysql" && pair && this.store("mysql") === pair.replica) {
      await pair.query(pair.replica, "SET GLOBAL read_only = OFF");
    }
    // A promoted Redis replica is started with --replicaof again: a master once more.
    const redis = this.stores.get("redis");
    if (kind === "redis" && redis && this.redisSet?.replicas.includes(redis as never)) {
      await redisCommand(redis.port, "REPLICAOF", "NO", "ONE");
    }
  }

  /** The server `label`, or an error naming it. */
  server(label: string): LeafProcess {
    const server = this.servers.get(label);
    if (!server) throw new Error(`[leaf] [nemesis] no server ${label}`);
    return server;
  }

  /** The proxy between `label` and `store`. */
  proxy(label: string, store: StoreKind): TcpProxy {
    const proxy = this.proxies.get(linkName(label, store));
    if (!proxy) throw new Error(`[leaf] [nemesis] no link ${linkName(label, store)}`);
    return proxy;
  }

  /** `store`'s address as server `label` reaches it (through its proxy). */
  urlOf(label: string, store: StoreKind): string {
    const port = this.proxy(label, store).port;
    switch (store) {
      case "mysql":
        return this.db!.urlVia(port);
      case "zookeeper":
        return `127.0.0.1:${port}`;
      case "redis":
        return `redis://127.0.0.1:${port}`;
      case "etcd":
        return `http://127.0.0.1:${port}`;
      case "postgres":
        return this.pgDb!.urlVia(port);
    }
  }

  /**
   * Starts a server, retrying a refused start (a worker id still leased, a clock check) up to
   * `attempts` times, 2 s apart. Returns whether it serves; each refusal is an event.
   */
  async startServer(label: string, attempts = 1): Promise<boolean> {
    const server = this.server(label);
    for (let i = 0; i < attempts; i++) {
      if (server.running) return true;
      const outcome = await server.tryStart();
      if (outcome.started) {
        this.note(`${label} started (#${server.incarnation}, ${Math.round(outcome.ms)} ms)`);
        for (const d of this.down)
          if (d.server === label && d.toMs === Infinity) d.toMs = this.history.now();
        return true;
      }
      const why = /refusing to start[^\n]*|[A-Z_]{6,}[^\n]{0,160}/.exec(outcome.output)?.[0];
      this.note(`${label} refused to start (exit ${outcome.code}): ${why ?? "no reason printed"}`);
      if (i + 1 < attempts) await sleep(2000);
    }
    if (!this.down.some((d) => d.server === label && d.toMs === Infinity)) {
      this.down.push({ server: label, fromMs: this.history.now(), toMs: Infinity });
    }
    return false;
  }

  /**
   * The worker id server `label` holds now: one id taken from it (recorded in the history as the
   * client "nemesis probe") and decoded by it. Undefined when it gives none.
   */
  async heldWorkerId(label: string, space: string): Promise<number | undefined> {
    const server = this.server(label);
    const incarnation = server.incarnation;
    const fromMs = this.history.now();
    const answer = await server.getJson<{ id?: string }>("/api/v1/snowflake/id", 1500);
    if (typeof answer?.id !== "string") return undefined;
    const id = BigInt(answer.id);
    this.history.record(
      {
        client: "nemesis probe",
        server: label,
        incarnation,
        fromMs,
        toMs: this.history.now(),
        mode: "snowflake",
        space,
        ids: 1,
      },
      [id],
      false,
    );
    const decoded = await server.getJson<{ workerId?: string }>(
      `/decodeSnowflakeId?snowflakeId=${answer.id}`,
      1500,
    );
    return decoded?.workerId === undefined ? undefined : Number(decoded.workerId);
  }

  /** Records a promise broken outside the history (the checker fails the run on it). */
  breaks(promise: string, text: string): void {
    this.broken.push({ atMs: Math.round(this.history.now()), promise, text });
    this.note(`BROKEN ${promise}: ${text}`);
  }

  /** Logs and records an event. */
  note(text: string): void {
    this.log(
      `  ${(this.history.now() / 1000).toFixed(1).padStart(6)} s  ${this.history.event(text)}`,
    );
  }

  /** Stops every server, proxy and store. */
  async dispose(): Promise<void> {
    await Promise.all([...this.servers.values()].map((s) => s.kill().catch(() => undefined)));
    await Promise.all([...this.proxies.values()].map((p) => p.close().catch(() => undefined)));
    await this.db?.close().catch(() => undefined);
    if (this.ensemble) {
      await this.ensemble.dispose().catch(() => undefined);
      this.stores.delete("zookeeper");
    }
    if (this.replicaPair) {
      await this.replicaPair.dispose().catch(() => undefined);
      this.stores.delete("mysql");
    }
    await this.pgDb?.close().catch(() => undefined);
    if (this.redisSet) {
      await this.redisSet.dispose().catch(() => undefined);
      this.stores.delete("redis");
    }
    if (this.postgresPair) {
      await this.postgresPair.dispose().catch(() => undefined);
      this.stores.delete("postgres");
    }
    await Promise.all([...this.stores.values()].map((s) => s.dispose().catch(() => undefined)));
  }
}

/** "A~mysql". */
export function linkName(label: string, store: StoreKind): string {
  return `${label}~${store}`;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
