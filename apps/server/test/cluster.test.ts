import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { layouts } from "@leaf/core";
import { createSchema, MysqlSegmentStore } from "@leaf/segment-mysql";
import {
  freePort,
  type MysqlHandle,
  spawnNode,
  startMysql,
  startZookeeper,
  stopAll,
  type ZookeeperHandle,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer } from "./helpers";

const CLI = new URL("../src/cli.ts", import.meta.url).pathname;
const IDS_PER_MODE = 100_000;
const dirs: string[] = [];
let mysql: MysqlHandle;
let zookeeper: ZookeeperHandle;

beforeAll(async () => {
  [mysql, zookeeper] = await Promise.all([startMysql({ useEnv: false }), startZookeeper()]);
});

afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Java Leaf's JDBC form of the kit's URL for `database`. */
function jdbcUrl(database: string): string {
  return `jdbc:mysql://${mysql.host}:${mysql.port}/${database}?useUnicode=true&characterEncoding=utf8`;
}

/** Starts the CLI as its own process and resolves with its base URL once it serves. */
async function startProcess(
  env: Record<string, string>,
): Promise<{ url: string; stop: () => Promise<number | null> }> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), "leaf-cluster-"));
  dirs.push(dataDir);
  const child = spawnNode(CLI, [], {
    env: { ...env, LEAF_SERVER_PORT: String(port), LEAF_DATA_DIR: dataDir, LEAF_LOG_LEVEL: "warn" },
  });
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => {
    output += c;
  });
  child.stderr!.setEncoding("utf8").on("data", (c: string) => {
    output += c;
  });
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => resolve(code)),
  );
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (output.includes("Stop with Ctrl-C")) {
        clearInterval(timer);
        resolve();
      }
    }, 50);
    void exited.then((code) => {
      clearInterval(timer);
      reject(new Error(`server exited with ${code}:\n${output}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () => {
      child.kill("SIGTERM");
      return exited;
    },
  };
}

/** Runs `tasks` with at most `limit` at a time. */
async function pool<T>(tasks: Array<() => Promise<T>>, limit: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < tasks.length) {
        const i = next++;
        results[i] = await tasks[i]!();
      }
    }),
  );
  return results;
}

async function fetchText(url: string): Promise<string> {
  const res = await fetch(url);
  const body = await res.text();
  if (res.status !== 200) throw new Error(`${url} -> ${res.status} ${body}`);
  return body;
}

/** 100,000 ids of one mode from one server: single ids, text batches and JSON batches. */
async function takeIds(base: string, path: string, jsonPath: string): Promise<string[]> {
  const singles = 2_000;
  const jsonBatches = 8;
  const textBatches = (IDS_PER_MODE - singles - jsonBatches * 1000) / 1000;
  const tasks: Array<() => Promise<string[]>> = [];
  for (let i = 0; i < singles; i++) tasks.push(async () => [await fetchText(`${base}${path}`)]);
  for (let i = 0; i < textBatches; i++) {
    tasks.push(async () => (await fetchText(`${base}${path}?count=1000`)).trimEnd().split("\n"));
  }
  for (let i = 0; i < jsonBatches; i++) {
    tasks.push(
      async () => JSON.parse(await fetchText(`${base}${jsonPath}?count=1000`)).ids as string[],
    );
  }
  return (await pool(tasks, 8)).flat();
}

describe("three server processes against one MariaDB and one ZooKeeper", () => {
  it("hand out 100,000 ids each from both modes with no duplicate", async () => {
    const database = await mysql.createDatabase("leaf_cluster");
    const storeOptions = {
      url: mysql.urlFor(database),
      user: mysql.user,
      password: mysql.password ?? "",
    };
    await createSchema(storeOptions);
    const store = new MysqlSegmentStore(storeOptions);
    await store.createTag({ tag: "cluster", step: 1000, description: "three processes" });
    await store.close();
    const env = {
      LEAF_NAME: `cluster_${database}`,
      LEAF_JDBC_URL: jdbcUrl(database),
      LEAF_JDBC_USERNAME: mysql.user,
      LEAF_JDBC_PASSWORD: mysql.password ?? "",
      LEAF_SNOWFLAKE_ZK_ADDRESS: zookeeper.url,
    };
    const servers = await Promise.all([startProcess(env), startProcess(env), startProcess(env)]);
    try {
      const workers = await Promise.all(
        servers.map(async (s) => JSON.parse(await fetchText(`${s.url}/api/v1/monitor`)).snowflake),
      );
      expect(workers.map((w) => w.registry)).toEqual(["zk", "zk", "zk"]);
      expect(new Set(workers.map((w) => w.workerId)).size).toBe(3);

      const perServer = await Promise.all(
        servers.map(async (s) => {
          const [segment, snowflake] = await Promise.all([
            takeIds(s.url, "/api/segment/get/cluster", "/api/v1/segment/cluster/ids"),
            takeIds(s.url, "/api/snowflake/get/cluster", "/api/v1/snowflake/ids"),
          ]);
          return { segment, snowflake };
        }),
      );
      for (const mode of ["segment", "snowflake"] as const) {
        const all = perServer.flatMap((p) => p[mode]);
        expect(all.length, mode).toBe(3 * IDS_PER_MODE);
        expect(
          all.every((id) => /^[0-9]{1,19}$/.test(id)),
          mode,
        ).toBe(true);
        expect(new Set(all).size, `${mode}: duplicates`).toBe(all.length);
      }
      // Each server's snowflake ids carry its own worker id.
      perServer.forEach((p, i) => {
        expect(
          new Set(p.snowflake.slice(0, 50).map((id) => layouts.leaf.decompose(id).workerId)),
        ).toEqual(new Set([workers[i].workerId]));
      });
    } finally {
      const codes = await Promise.all(servers.map((s) => s.stop()));
      expect(codes).toEqual([0, 0, 0]);
    }
    // Three processes taking 600,000 ids: over a minute on a loaded 2-core machine.
  }, 240_000);
});

describe("segment mode on MariaDB", () => {
  it("answers 503 with Leaf's code -3 when both segments are used up and the database does not answer, and recovers", async () => {
    const database = await mysql.createDatabase("leaf_outage");
    const test = await startTestServer({
      snowflake: { enabled: false },
      segment: {
        mysql: {
          url: jdbcUrl(database),
          username: mysql.user,
          password: mysql.password ?? "",
          createTable: true,
        },
        exhaustedWaitMs: 300,
        dynamicStep: false,
      },
      server: { adminToken: "admin-token-0123456789abcdef" },
    });
    try {
      const created = await test.server.app.inject({
        method: "POST",
        url: "/api/v1/admin/tags",
        headers: { authorization: "Bearer admin-token-0123456789abcdef" },
        payload: { tag: "small", step: 10 },
      });
      expect(created.statusCode).toBe(201);
      // The second id starts the load of the next range (10% of the current one is used).
      expect((await test.server.app.inject("/api/segment/get/small")).body).toBe("1");
      expect((await test.server.app.inject("/api/segment/get/small")).body).toBe("2");
      // Let the second range load, then stop the database.
      await new Promise((r) => setTimeout(r, 200));
      mysql.pause();
      const answers: Array<{ status: number; body: string }> = [];
      try {
        for (let i = 0; i < 25; i++) {
          const res = await test.server.app.inject("/api/segment/get/small");
          answers.push({ status: res.statusCode, body: res.body });
        }
      } finally {
        mysql.resume();
      }
      const served = answers.filter((a) => a.status === 200).map((a) => Number(a.body));
      // The loaded ranges ([1, 11) and [11, 21)) are served through the outage, then -3.
      expect(served).toEqual(Array.from({ length: 18 }, (_, i) => i + 3));
      const refused = answers.filter((a) => a.status !== 200);
      expect(refused.length).toBe(7);
      for (const a of refused) {
        expect(a.status).toBe(503);
        expect(a.body).toMatch(/^Result\{id=-3, status=EXCEPTION\}\nSEGMENTS_EXHAUSTED: /);
      }
      const ready = await test.server.app.inject("/health/ready");
      expect(ready.statusCode).toBe(200);
      // Once the database answers again, ids come back, never below those served.
      let recovered: string | undefined;
      for (let i = 0; i < 100 && recovered === undefined; i++) {
        const res = await test.server.app.inject("/api/segment/get/small");
        if (res.statusCode === 200) recovered = res.body;
        else await new Promise((r) => setTimeout(r, 200));
      }
      expect(Number(recovered)).toBeGreaterThanOrEqual(21);
      const metrics = (await test.server.app.inject("/metrics")).body;
      expect(metrics).toMatch(
        /leaf_request_errors_total\{mode="segment",code="SEGMENTS_EXHAUSTED"\} 7/,
      );
    } finally {
      mysql.resume();
      await test.stop();
    }
  });
});

describe("snowflake mode on the other registries", () => {
  it("takes its worker id from the MySQL registry (the fork's leaf_workerid_alloc)", async () => {
    const database = await mysql.createDatabase("leaf_registry");
    const servers = [];
    try {
      for (let i = 0; i < 2; i++) {
        servers.push(
          await startTestServer({
            segment: { enabled: false },
            snowflake: {
              registry: "mysql",
              mysql: {
                url: jdbcUrl(database),
                username: mysql.user,
                password: mysql.password ?? "",
                createTable: true,
              },
            },
          }),
        );
      }
      const workers = servers.map((s) => s.server.services.snowflake!.worker.lease!.workerId);
      expect(new Set(workers).size).toBe(2);
      for (const [i, s] of servers.entries()) {
        const id = (await s.server.app.inject("/api/snowflake/get/x")).body;
        expect(layouts.leaf.decompose(id).workerId).toBe(workers[i]);
        const monitor = (await s.server.app.inject("/api/v1/monitor")).json();
        expect(monitor.snowflake).toMatchObject({ registry: "mysql", state: "held" });
      }
    } finally {
      for (const s of servers) await s.stop();
    }
  });

  it("takes a recycled worker id from ZooKeeper with the fork's zk_recycle mode", async () => {
    const test = await startTestServer({
      name: `recycle-${Date.now()}`,
      segment: { enabled: false },
      snowflake: { registry: "zk_recycle", zk: { address: zookeeper.url } },
    });
    try {
      const res = await test.server.app.inject("/api/snowflake/get/x");
      expect(res.statusCode).toBe(200);
      expect(layouts.leaf.decompose(res.body).workerId).toBe(
        test.server.services.snowflake!.worker.lease!.workerId,
      );
      expect((await test.server.app.inject("/health/ready")).statusCode).toBe(200);
    } finally {
      await test.stop();
    }
  });
});
