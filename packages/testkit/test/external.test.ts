import { Redis } from "ioredis";
import { createConnection } from "mysql2/promise";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  isExternal,
  type MysqlHandle,
  type RedisHandle,
  startMysql,
  startRedis,
  startZookeeper,
  TestkitError,
  type ZookeeperHandle,
} from "../src/index";

// The "external" servers here are private ones started first, named through LEAF_TEST_* the way
// CI would name a shared server.
const variables = ["LEAF_TEST_MYSQL_URL", "LEAF_TEST_REDIS_URL", "LEAF_TEST_ZK"] as const;
const saved = Object.fromEntries(variables.map((name) => [name, process.env[name]]));

function restoreEnv(): void {
  for (const name of variables) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
}

describe("LEAF_TEST_* variables", () => {
  let realRedis: RedisHandle;
  let realMysql: MysqlHandle;
  let realZookeeper: ZookeeperHandle;

  beforeAll(async () => {
    [realRedis, realMysql, realZookeeper] = await Promise.all([
      startRedis({ useEnv: false }),
      startMysql({ useEnv: false }),
      startZookeeper({ useEnv: false }),
    ]);
  });

  afterEach(restoreEnv);

  afterAll(async () => {
    await Promise.all([realRedis.dispose(), realMysql.dispose(), realZookeeper.dispose()]);
  });

  it("make startRedis() use that server, and its fault methods refuse clearly", async () => {
    process.env.LEAF_TEST_REDIS_URL = realRedis.url;
    expect(isExternal("redis")).toBe(true);
    const redis = await startRedis();
    expect(redis).toMatchObject({
      external: true,
      host: "127.0.0.1",
      port: realRedis.port,
      url: realRedis.url,
      pid: undefined,
      dir: undefined,
    });
    await expect(redis.kill()).rejects.toThrow(
      "[leaf] [testkit] cannot kill an external server (LEAF_TEST_REDIS_URL)",
    );
    await expect(redis.restart()).rejects.toBeInstanceOf(TestkitError);
    expect(() => redis.pause()).toThrow(/cannot pause an external server/);
    await redis.dispose();
    const client = new Redis(realRedis.url);
    try {
      expect(await client.ping()).toBe("PONG");
    } finally {
      client.disconnect();
    }
  });

  it("make startMysql() use that server, and dispose() drops only the databases it created", async () => {
    const keep = await realMysql.createDatabase("keep");
    process.env.LEAF_TEST_MYSQL_URL = `mysql://root@127.0.0.1:${realMysql.port}/`;
    const mysql = await startMysql();
    expect(mysql.external).toBe(true);
    expect(mysql.url).toBe(realMysql.url);
    const mine = await mysql.createDatabase("mine");
    const databases = async () => {
      const connection = await createConnection(realMysql.connectionOptions());
      try {
        const [rows] = await connection.query("SHOW DATABASES");
        return (rows as Array<{ Database: string }>).map((row) => row.Database);
      } finally {
        await connection.end();
      }
    };
    expect(await databases()).toEqual(expect.arrayContaining([keep, mine]));
    await mysql.dispose();
    const after = await databases();
    expect(after).toContain(keep);
    expect(after).not.toContain(mine);
  });

  it("make startZookeeper() use that server", async () => {
    process.env.LEAF_TEST_ZK = realZookeeper.url;
    const zk = await startZookeeper();
    expect(zk).toMatchObject({ external: true, port: realZookeeper.port, url: realZookeeper.url });
    await expect(zk.stop()).rejects.toThrow("cannot stop an external server (LEAF_TEST_ZK)");
    await zk.dispose();
  });

  it("are ignored with useEnv: false, for tests that must break their server", async () => {
    process.env.LEAF_TEST_REDIS_URL = realRedis.url;
    const redis = await startRedis({ useEnv: false });
    try {
      expect(redis.external).toBe(false);
      expect(redis.port).not.toBe(realRedis.port);
    } finally {
      await redis.dispose();
    }
  });

  it("name the variable when its server cannot be reached", async () => {
    process.env.LEAF_TEST_REDIS_URL = "redis://127.0.0.1:1";
    await expect(startRedis()).rejects.toThrow(
      /^\[leaf\] \[testkit\] LEAF_TEST_REDIS_URL=redis:\/\/127\.0\.0\.1:1: no Redis answers/,
    );
    process.env.LEAF_TEST_MYSQL_URL = "not a url";
    await expect(startMysql()).rejects.toThrow(/LEAF_TEST_MYSQL_URL=not a url: not a URL/);
  });
});
