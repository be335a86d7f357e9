// The server on the Redis segment store, as an operator runs it: the namespace created once with
// `leaf store create-namespace`, two servers sharing it with every id counted, a start refused
// without the namespace or while it is fenced, and Redis restarted empty under two running servers:
// ids refused rather than repeated.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, type RedisHandle, runNode, startRedis, stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/index";
import { CLI, startCli, text } from "./cli-process";

const TOKEN = "redis-store-admin-token-0123456789";

let redis: RedisHandle;
const dirs: string[] = [];

beforeAll(async () => {
  redis = await startRedis({ useEnv: false });
}, 60_000);

afterAll(async () => {
  await redis?.dispose();
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "leaf-server-redis-store-"));
  dirs.push(dir);
  return dir;
}

/** A server of the Redis store in `namespace`, segment mode only. */
function storeEnv(namespace: string, port?: number): Record<string, string> {
  return {
    ...(port !== undefined ? { LEAF_SERVER_PORT: String(port) } : {}),
    LEAF_SERVER_HOST: "127.0.0.1",
    LEAF_SERVER_ADMIN_TOKEN: TOKEN,
    LEAF_SEGMENT_REDIS_URL: redis.url,
    LEAF_SEGMENT_REDIS_NAMESPACE: namespace,
    LEAF_SNOWFLAKE_ENABLED: "false",
  };
}

/** `leaf store ARGS` with the environment of {@link storeEnv}. */
function storeCommand(namespace: string, ...args: string[]) {
  return runNode(CLI, ["store", ...args], {
    cwd: tempDir(),
    env: storeEnv(namespace),
    timeoutMs: 60_000,
  });
}

async function createTag(port: number, tag: string, step: number): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/admin/tags`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ tag, step }),
  });
  expect(res.status, await res.text()).toBe(201);
}

describe("the server on the Redis segment store", () => {
  it("reads segment.redis.* (the namespace defaults to the service name) and checks it", () => {
    const dir = tempDir();
    const config = loadConfig({
      env: {
        LEAF_NAME: "orders",
        LEAF_SEGMENT_REDIS_URL: redis.url,
        LEAF_SNOWFLAKE_ENABLED: "false",
      },
      cwd: dir,
    });
    expect(config.segment?.store).toBe("redis");
    expect(config.segment?.backend).toMatchObject({
      namespace: "orders",
      keyPrefix: "leaf:segment:",
      waitReplicas: 0,
    });
    expect(config.server.host).toBe("0.0.0.0");
    expect(() =>
      loadConfig({
        env: {
          LEAF_SEGMENT_REDIS_URL: redis.url,
          LEAF_SEGMENT_REDIS_NAMESPACE: "a{b}",
          LEAF_SNOWFLAKE_ENABLED: "false",
        },
        cwd: dir,
      }),
    ).toThrow("invalid LEAF_SEGMENT_REDIS_NAMESPACE (environment)");
    expect(() =>
      loadConfig({
        env: { LEAF_SEGMENT_REDIS_URL: "http://x:1", LEAF_SNOWFLAKE_ENABLED: "false" },
        cwd: dir,
      }),
    ).toThrow("expected a Redis URL");
  });

  it("refuses to start without the namespace, naming the command that creates it; the command lists and runs", async () => {
    const run = await runNode(CLI, [], {
      cwd: tempDir(),
      env: { ...storeEnv("fresh", await freePort()), LEAF_SERVER_DRAIN_MS: "0" },
      timeoutMs: 60_000,
    });
    expect(run.code, run.stdout).toBe(1);
    expect(run.stderr).toContain("has no marker");
    expect(run.stderr).toContain("leaf store create-namespace");

    const list = await storeCommand("fresh");
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain("leaf store lift-fence RAISE_BY");
    const bad = await storeCommand("fresh", "lift-fence");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("lift-fence needs RAISE_BY");
    const unknown = await storeCommand("fresh", "drop-everything");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('the redis store has no command "drop-everything"');

    const created = await storeCommand("fresh", "create-namespace");
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toContain("created the Redis segment namespace");
    const again = await storeCommand("fresh", "create-namespace");
    expect(again.stdout).toContain("exists already: nothing changed");
    const unfenced = await storeCommand("fresh", "lift-fence", "0");
    expect(unfenced.stdout).toContain("was not fenced: nothing changed");
  }, 120_000);

  it("serves two servers from one namespace with every id once; after Redis restarts empty it refuses rather than repeats", async () => {
    expect((await storeCommand("shared", "create-namespace")).code).toBe(0);
    const ports = [await freePort(), await freePort()];
    // A fixed step and Java Leaf's double buffer: each server holds at most two ranges of 10 when
    // Redis empties, so 60 more draws from each must reach the store. (With the dynamic step and a
    // deeper prefetch the ranges held ahead may outlast the draws, and nothing would be refused.)
    const held = { LEAF_SEGMENT_DYNAMIC_STEP: "false", LEAF_SEGMENT_PREFETCH_MAX_DEPTH: "1" };
    const a = await startCli(tempDir(), { ...storeEnv("shared", ports[0]), ...held });
    await createTag(ports[0]!, "orders", 10);
    const b = await startCli(tempDir(), { ...storeEnv("shared", ports[1]), ...held });
    const answered: string[] = [];
    let refused = 0;
    const draw = async (rounds: number) => {
      for (let i = 0; i < rounds; i++) {
        for (const port of ports) {
          const res = await text(`http://127.0.0.1:${port}/api/segment/get/orders`);
          if (res.status === 200) answered.push(res.body);
          else refused++;
        }
      }
    };
    try {
      await draw(60);
      expect(refused).toBe(0);
      const monitor = JSON.parse((await text(`http://127.0.0.1:${ports[1]}/api/v1/monitor`)).body);
      expect(monitor.segment.backend).toMatchObject({ kind: "redis", shared: true });
      expect(monitor.segment.backend.target).toContain("leaf:segment:{shared}");

      // Redis loses everything (no persistence): the marker is gone, so no range is taken again.
      await redis.kill();
      await redis.start();
      await draw(60);
      expect(refused).toBeGreaterThan(0);
      expect(new Set(answered).size).toBe(answered.length);
      // A server started now is refused too, with what to do.
      const late = await runNode(CLI, [], {
        cwd: tempDir(),
        env: { ...storeEnv("shared", await freePort()), LEAF_SERVER_DRAIN_MS: "0" },
        timeoutMs: 60_000,
      });
      expect(late.code).toBe(1);
      expect(late.stderr).toContain("has no marker");
    } finally {
      a.child.kill("SIGTERM");
      b.child.kill("SIGTERM");
      await a.exited;
      await b.exited;
    }
  }, 180_000);
});
