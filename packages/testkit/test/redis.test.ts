import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  freePort,
  type RedisHandle,
  redisCommand,
  redisHash,
  redisInfoField,
  redisReplicaInSync,
  redisTimeMs,
  startRedis,
  waitUntil,
} from "../src/index";

describe("startRedis", () => {
  let redis: RedisHandle;
  const clients: Redis[] = [];

  function client(options: { commandTimeout?: number } = {}): Redis {
    const connection = new Redis(redis.url, { lazyConnect: true, ...options });
    connection.on("error", () => {
      // Reconnect noise while the server is down is expected in these tests.
    });
    clients.push(connection);
    return connection;
  }

  beforeAll(async () => {
    redis = await startRedis({ useEnv: false });
  });

  it("answers one command on a connection of its own (redisCommand, redisInfoField)", async () => {
    expect(await redisCommand(redis.port, "PING")).toBe("PONG");
    expect(await redisCommand(redis.port, "SET", "one-shot", "1")).toBe("OK");
    expect(await redisCommand(redis.port, "GET", "one-shot")).toBe("1");
    expect(await redisInfoField(redis.port, "server", "tcp_port")).toBe(String(redis.port));
    expect(await redisInfoField(redis.port, "replication", "role")).toBe("master");
    expect(await redisInfoField(redis.port, "server", "no_such_field")).toBe("");
    expect(await redisCommand(redis.port, "NO-SUCH-COMMAND")).toBeUndefined();
    expect(await redisCommand(await freePort(), "PING")).toBeUndefined();
    await redisCommand(redis.port, "HSET", "one-hash", "a", "1", "b", "2");
    expect(await redisHash(redis.port, "one-hash")).toEqual({ a: "1", b: "2" });
    expect(await redisHash(redis.port, "no-such-hash")).toEqual({});
    expect(Math.abs((await redisTimeMs(redis.port)) - Date.now())).toBeLessThan(60_000);
    // A master replicates from nothing.
    expect(await redisReplicaInSync(redis.port, redis.port)).toBe(false);
  });

  it("waitUntil polls until a check passes, and names what it waited for when it gives up", async () => {
    let calls = 0;
    await waitUntil("three calls", async () => ++calls >= 3, 5_000, 1);
    expect(calls).toBe(3);
    await expect(waitUntil("nothing", () => false, 50, 10)).rejects.toThrow(
      "timed out waiting for nothing",
    );
  });

  afterAll(async () => {
    for (const connection of clients) connection.disconnect();
    await redis.dispose();
  });

  it("runs a private server that answers PING, SET and GET", async () => {
    expect(redis.external).toBe(false);
    expect(redis.host).toBe("127.0.0.1");
    expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
    const connection = client();
    expect(await connection.ping()).toBe("PONG");
    await connection.set("greeting", "hello");
    expect(await connection.get("greeting")).toBe("hello");
  });

  it("comes back empty on the same port after kill() and start()", async () => {
    const before = client();
    await before.set("survivor", "no");
    const { port, pid } = redis;
    await redis.kill();
    expect(redis.running).toBe(false);
    expect(redis.pid).toBeUndefined();
    await redis.start();
    expect(redis.port).toBe(port);
    expect(redis.pid).not.toBe(pid);
    expect(await client().get("survivor")).toBeNull();
  });

  it("stops answering while paused and answers again after resume()", async () => {
    const connection = client({ commandTimeout: 300 });
    expect(await connection.ping()).toBe("PONG");
    redis.pause();
    try {
      await expect(connection.ping()).rejects.toThrow(/timed out/i);
    } finally {
      redis.resume();
    }
    expect(await client().ping()).toBe("PONG");
  });

  it("stops a paused server and starts it again", async () => {
    redis.pause();
    await redis.stop();
    expect(redis.running).toBe(false);
    await Promise.all([redis.start(), redis.start()]);
    expect(await client().ping()).toBe("PONG");
  });

  it("restarts gracefully on the same port", async () => {
    const { port } = redis;
    await redis.restart();
    expect(redis.port).toBe(port);
    expect(await client().ping()).toBe("PONG");
  });
});
