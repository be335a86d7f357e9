// `leaf-server --workers 2` on the stores and registries workers.test.ts leaves out, one server per
// combination, each serving every mode it can: the PostgreSQL store with the PostgreSQL registry
// (both tables created by the workers at their start), the Redis segment store with the etcd
// registry, a residue set of a MariaDB and a PostgreSQL database with the MySQL registry in lease
// mode and the redis sequence, and the MySQL store (its table created by the workers) with
// ZooKeeper in recycle mode. Every id counted: none twice, each worker its own worker id (and only
// those in the snowflake ids), both workers took ranges.
import { RedisSegmentStore } from "@leaf/segment-redis";
import {
  type EtcdHandle,
  type LeafServerProcess,
  type MysqlHandle,
  type PostgresHandle,
  type RedisHandle,
  startEtcd,
  startMysql,
  startPostgres,
  startRedis,
  startZookeeper,
  stopAll,
  type ZookeeperHandle,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formResidueSetCommand } from "../src/backends/residue-store";
import { loadConfig } from "../src/index";
import { removeServerFolders, servesFromBoth, workersServer } from "./workers-process";

const NAME = "workers-backends";
const ADMIN = "admin-token-0123456789abcdef";
/** Ids counted per server, every mode together. */
const IDS = 30_000;

let pg: PostgresHandle;
let mysql: MysqlHandle;
let redis: RedisHandle;
let etcd: EtcdHandle;
let zookeeper: ZookeeperHandle;
const servers: LeafServerProcess[] = [];

beforeAll(async () => {
  [pg, mysql, redis, etcd, zookeeper] = await Promise.all([
    startPostgres({ useEnv: false }),
    startMysql({ useEnv: false }),
    startRedis({ useEnv: false }),
    startEtcd({ useEnv: false }),
    startZookeeper({ useEnv: false }),
  ]);
}, 180_000);

afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop().catch(() => undefined)));
  await stopAll();
  removeServerFolders();
});

/** A server of 2 workers on `config`, started, with tag `t` (step 500) made by the admin API. */
async function started(label: string, config: Record<string, unknown>) {
  const server = await workersServer(label, {
    name: NAME,
    server: { adminToken: ADMIN },
    ...config,
  });
  servers.push(server);
  await server.start();
  if ((config.segment as { enabled?: boolean } | undefined)?.enabled !== false) {
    const created = await fetch(`${server.url}/api/v1/admin/tags`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify({ tag: "t", step: 500 }),
    });
    expect(created.status, await created.text()).toBe(201);
  }
  return server;
}

describe("leaf-server --workers 2 on every store and registry", () => {
  it("serves segment on PostgreSQL and snowflake from the PostgreSQL registry, both tables created by the workers", async () => {
    const url = pg.urlFor(await pg.createDatabase("workers_pg"));
    const server = await started("postgres", {
      segment: { postgres: { url, password: "", createTable: true }, dynamicStep: false },
      snowflake: {
        registry: "postgres",
        ip: "127.0.0.1",
        postgres: { url, password: "", createTable: true, leaseMs: 3000 },
      },
    });
    const { workers, counts } = await servesFromBoth(
      server,
      { segment: "t", snowflake: true },
      IDS,
    );
    console.log(
      `postgres store + registry, 2 workers: ${JSON.stringify(counts)} ids, 0 twice; worker ids ${workers.map((w) => w.summary!.workerId).join(", ")}`,
    );
    expect(await server.stop()).toEqual({ code: 0, signal: null });
  }, 120_000);

  it("serves segment on the Redis store and snowflake from the etcd registry", async () => {
    const namespace = "workers";
    const setup = new RedisSegmentStore({ url: redis.url, namespace });
    await setup.createNamespace();
    await setup.close();
    const server = await started("redis-etcd", {
      segment: { redis: { url: redis.url, namespace }, dynamicStep: false },
      snowflake: {
        registry: "etcd",
        ip: "127.0.0.1",
        etcd: { url: etcd.url, prefix: "/workers-backends", leaseTtlSeconds: 3 },
      },
    });
    const { workers, counts } = await servesFromBoth(
      server,
      { segment: "t", snowflake: true },
      IDS,
    );
    console.log(
      `redis store + etcd registry, 2 workers: ${JSON.stringify(counts)} ids, 0 twice; worker ids ${workers.map((w) => w.summary!.workerId).join(", ")}`,
    );
    expect(await server.stop()).toEqual({ code: 0, signal: null });
  }, 120_000);

  it("serves segment on a MariaDB + PostgreSQL residue set, snowflake from the MySQL registry (lease mode) and the redis sequence", async () => {
    const members = [
      `mysql://${mysql.user}:@127.0.0.1:${mysql.port}/${await mysql.createDatabase("residue")}`,
      `postgres://${pg.user}:@127.0.0.1:${pg.port}/${await pg.createDatabase("residue")}`,
    ];
    const segment = { residue: { members, createTable: true }, dynamicStep: false };
    // The set formed once, as `leaf-server --form-residue-set` does.
    const lines: string[] = [];
    const formed = await formResidueSetCommand(
      loadConfig({ values: { segment, snowflake: { enabled: false } }, env: {} }),
      (line) => lines.push(line),
    );
    expect(formed, lines.join("\n")).toBe(0);
    const registryDb = await mysql.createDatabase("workers_reg");
    const server = await started("residue", {
      segment,
      snowflake: {
        registry: "mysql",
        ip: "127.0.0.1",
        mysql: {
          url: mysql.urlFor(registryDb),
          password: mysql.password ?? "",
          mode: "lease",
          leaseMs: 3000,
          createTable: true,
        },
      },
      redisSequence: { url: redis.url, namespace: "workers-sequence" },
    });
    const { workers, counts } = await servesFromBoth(
      server,
      { segment: "t", snowflake: true, redisSequence: true },
      IDS,
    );
    console.log(
      `residue set (MariaDB + PostgreSQL) + MySQL lease registry + redis sequence, 2 workers: ${JSON.stringify(counts)} ids, 0 twice; worker ids ${workers.map((w) => w.summary!.workerId).join(", ")}`,
    );
    expect(await server.stop()).toEqual({ code: 0, signal: null });
  }, 120_000);

  it("serves segment on MySQL, its table created by the workers, and snowflake from ZooKeeper in recycle mode", async () => {
    const url = mysql.urlFor(await mysql.createDatabase("workers_zk"));
    const server = await started("mysql-zk-recycle", {
      segment: {
        mysql: { url, password: mysql.password ?? "", createTable: true },
        dynamicStep: false,
      },
      snowflake: {
        registry: "zk",
        ip: "127.0.0.1",
        zk: { address: zookeeper.url, mode: "recycle" },
      },
    });
    const { workers, counts } = await servesFromBoth(
      server,
      { segment: "t", snowflake: true },
      IDS,
    );
    console.log(
      `mysql store + zk recycle registry, 2 workers: ${JSON.stringify(counts)} ids, 0 twice; worker ids ${workers.map((w) => w.summary!.workerId).join(", ")}`,
    );
    expect(await server.stop()).toEqual({ code: 0, signal: null });
  }, 120_000);
});
