// `leaf-server --workers 2` (server.workers) as an operator runs it: one primary process and two
// worker processes sharing the port, each with its own snowflake worker id from the configured
// registry (local, ZooKeeper normal mode, MySQL, Redis) and its own segment ranges (MySQL, and the
// embedded store through the primary), every id counted; one server to look at (metrics, monitor,
// readiness); an admin change seen by every worker at once.
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MysqlSegmentStore } from "@leaf/segment-mysql";
import {
  countRepeatedIds,
  httpGet,
  type LeafServerProcess,
  type MysqlHandle,
  type RedisHandle,
  startMysql,
  startRedis,
  startZookeeper,
  stopAll,
  waitUntil,
  type ZookeeperHandle,
} from "@leaf/testkit";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  IdLoad,
  listWorkers,
  removeServerFolders,
  servesFromBoth,
  workersServer,
  workerTagView,
} from "./workers-process";

const NAME = "workers";
const ADMIN = "admin-token-0123456789abcdef";

let mysql: MysqlHandle;
let zookeeper: ZookeeperHandle;
let redis: RedisHandle;
const servers: LeafServerProcess[] = [];

beforeAll(async () => {
  [mysql, zookeeper, redis] = await Promise.all([
    startMysql({ useEnv: false }),
    startZookeeper({ useEnv: false }),
    startRedis({ useEnv: false }),
  ]);
}, 180_000);

afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop().catch(() => undefined)));
  await stopAll();
  removeServerFolders();
});

/** A database with the `leaf_alloc` table and tag `t` (step 500), as segment settings. */
async function mysqlSegment(): Promise<Record<string, unknown>> {
  const database = await mysql.createDatabase("workers");
  const url = mysql.urlFor(database);
  const setup = new MysqlSegmentStore({ url, user: mysql.user, password: mysql.password ?? "" });
  await setup.createSchema();
  await setup.createTag({ tag: "t", step: 500, startId: 1n });
  await setup.close();
  return { mysql: { url, password: mysql.password ?? "" }, dynamicStep: false };
}

async function started(label: string, config: Record<string, unknown>) {
  const server = await workersServer(label, { name: NAME, ...config });
  servers.push(server);
  await server.start();
  return server;
}

const kitRequire = createRequire(import.meta.resolve("@leaf/testkit"));
const zkClient = kitRequire("node-zookeeper-client") as {
  createClient(connectString: string): {
    once(event: "connected", listener: () => void): void;
    connect(): void;
    getChildren(path: string, callback: (error: Error | null, children: string[]) => void): void;
    close(): void;
  };
};

/** The children of a ZooKeeper node. */
async function zkChildren(path: string): Promise<string[]> {
  const client = zkClient.createClient(zookeeper.url);
  await new Promise<void>((resolve) => {
    client.once("connected", resolve);
    client.connect();
  });
  try {
    return await new Promise((resolve, reject) =>
      client.getChildren(path, (error, children) => (error ? reject(error) : resolve(children))),
    );
  } finally {
    client.close();
  }
}

/** The monitor page's worker rows in a browser: worker, pid, state, worker id. */
async function monitorRows(server: LeafServerProcess): Promise<string[][]> {
  const profile = mkdtempSync(join(tmpdir(), "leaf-chromium-"));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
  });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(10_000);
    await page.goto(`${server.url}/monitor`);
    const rows = page.locator('[data-testid="worker-row"]');
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(2);
    return await rows.evaluateAll((trs) =>
      trs.map((tr) => [...tr.querySelectorAll("td")].slice(0, 4).map((td) => td.textContent ?? "")),
    );
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

describe("leaf-server --workers 2", () => {
  it("serves segment on MySQL and snowflake on ZooKeeper (normal mode): a node per worker, Java Leaf's names", async () => {
    const server = await started("zk", {
      segment: await mysqlSegment(),
      snowflake: { registry: "zk", ip: "127.0.0.1", zk: { address: zookeeper.url } },
    });
    const { workers, counts } = await servesFromBoth(server, { segment: "t", snowflake: true });
    expect(workers.map((w) => w.summary!.node)).toEqual([
      `127.0.0.1:${server.port}`,
      `127.0.0.1~w2:${server.port}`,
    ]);
    // Java Leaf reads a node's worker id by splitting its name on '-': one '-', digits after it.
    const children = await zkChildren(`/snowflake/${NAME}/forever`);
    const parsed = children.map((name) => name.split("-"));
    expect(parsed.every((p) => p.length === 2 && /^\d{10}$/.test(p[1]!))).toBe(true);
    expect(new Map(parsed.map(([key, seq]) => [key, Number(seq)]))).toEqual(
      new Map(workers.map((w) => [w.summary!.node, w.summary!.workerId])),
    );
    // One server to look at: /metrics sums what every worker issued and keeps gauges per worker.
    const metrics = (await server.getText("/metrics"))!;
    const issued = (mode: string) =>
      Number(
        new RegExp(`^leaf_ids_issued_total\\{mode="${mode}"[^}]*\\} (\\d+)`, "m").exec(
          metrics,
        )?.[1],
      );
    expect(issued("segment")).toBe(counts.segment);
    expect(issued("snowflake")).toBe(counts.snowflake);
    for (const w of workers) {
      expect(metrics).toContain(
        `leaf_snowflake_worker_id{worker="${w.slot}"} ${w.summary!.workerId}`,
      );
      expect(metrics).toContain(`leaf_worker_up{worker="${w.slot}"} 1`);
    }
    const exit = await server.stop();
    expect(exit).toEqual({ code: 0, signal: null });
  }, 240_000);

  it("serves the embedded store through the primary and the local registry's ids 0 and 1 by default; the monitor page lists both", async () => {
    const server = await started("embedded", {});
    const { workers } = await servesFromBoth(server, {
      segment: "leaf-segment-test",
      snowflake: true,
    });
    expect(workers.map((w) => w.summary!.workerId)).toEqual([0, 1]);
    const rows = await monitorRows(server);
    expect(rows).toEqual(
      workers.map((w) => [String(w.slot), String(w.pid), "ready", String(w.summary!.workerId)]),
    );
    expect(await server.stop()).toEqual({ code: 0, signal: null });
  }, 240_000);

  it("takes each worker's own worker id from the MySQL registry (fixed) and from Redis", async () => {
    const database = await mysql.createDatabase("workers_reg");
    const registries = {
      mysql: {
        registry: "mysql",
        mysql: { url: mysql.urlFor(database), password: mysql.password ?? "", createTable: true },
      },
      redis: { registry: "redis", redis: { url: redis.url, leaseMs: 3000 } },
    };
    for (const [label, snowflake] of Object.entries(registries)) {
      const server = await started(label, {
        segment: { enabled: false },
        snowflake: { ip: "127.0.0.1", ...snowflake },
      });
      const { workers } = await servesFromBoth(server, { snowflake: true }, 40_000);
      expect(workers.map((w) => w.summary!.node)).toEqual([
        `127.0.0.1:${server.port}`,
        `127.0.0.1~w2:${server.port}`,
      ]);
      expect(await server.stop()).toEqual({ code: 0, signal: null });
    }
  }, 240_000);

  it("answers an admin change on every worker at once: a created tag served, a deleted one refused, a changed step taken by both", async () => {
    const server = await started("admin", { server: { adminToken: ADMIN } });
    const headers = { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" };
    // Each request on a new connection: node:cluster hands them to the workers in turn.
    const askAll = async (path: string) =>
      Promise.all(
        Array.from({ length: 8 }, () =>
          httpGet(server.port, path, { timeoutMs: 5000, headers: { connection: "close" } }),
        ),
      );
    for (let round = 0; round < 3; round++) {
      const tag = `made-${round}`;
      const created = await fetch(`${server.url}/api/v1/admin/tags`, {
        method: "POST",
        headers,
        body: JSON.stringify({ tag, step: 100, startId: "1" }),
      });
      expect(created.status, await created.text()).toBe(201);
      const after = await askAll(`/api/segment/get/${tag}`);
      expect(
        after.map((a) => a.status),
        after.map((a) => a.body).join("\n"),
      ).toEqual(Array(8).fill(200));
      // Both workers served it: each takes ranges of its own (step 100), so their ids fall in two
      // ranges.
      const ranges = new Set(after.map((a) => (BigInt(a.body) - 1n) / 100n));
      expect(ranges.size, after.map((a) => a.body).join(", ")).toBe(2);
      const deleted = await fetch(`${server.url}/api/v1/admin/tags/${tag}`, {
        method: "DELETE",
        headers: { authorization: headers.authorization },
      });
      expect(deleted.status).toBe(200);
      const gone = await askAll(`/api/segment/get/${tag}`);
      expect(gone.map((a) => a.status)).toEqual(Array(8).fill(404));
    }
    // A step changed through one worker under load: every worker's next range from the store is
    // taken with it (the monitor's tableStep, per worker that answers), and no id is answered
    // twice across the change.
    const tag = "stepped";
    const made = await fetch(`${server.url}/api/v1/admin/tags`, {
      method: "POST",
      headers,
      body: JSON.stringify({ tag, step: 100, startId: "1" }),
    });
    expect(made.status, await made.text()).toBe(201);
    const load = new IdLoad(
      server.port,
      Array(8).fill({ space: "segment", path: `/api/segment/get/${tag}?count=20` }),
      8,
    );
    await load.more(4000);
    expect(await tableSteps(server, tag)).toEqual(
      new Map([
        [1, 100],
        [2, 100],
      ]),
    );
    const patched = await fetch(`${server.url}/api/v1/admin/tags/${tag}`, {
      method: "PATCH",
      headers,
      body: JSON.stringify({ step: 1000 }),
    });
    expect(patched.status, await patched.text()).toBe(200);
    let steps = new Map<number, number>();
    await waitUntil(
      "both workers taking ranges of step 1000",
      async () => {
        steps = await tableSteps(server, tag);
        return steps.get(1) === 1000 && steps.get(2) === 1000;
      },
      30_000,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; table steps by worker: ${JSON.stringify([...steps])}`);
    });
    await load.stop();
    expect(load.codes.size, JSON.stringify(Object.fromEntries(load.codes))).toBe(0);
    const { duplicates, total } = countRepeatedIds([...load.ids.values()]);
    expect(total).toBeGreaterThan(4000);
    expect(duplicates).toBe(0);
    const workers = await listWorkers(server);
    expect(workers.map((w) => w.pid)).toHaveLength(2);
    expect(await server.stop()).toEqual({ code: 0, signal: null });
  }, 240_000);
});

/**
 * Per worker, the store's step for `tag` as of that worker's last range (the monitor's
 * `tableStep`), asked on new connections until both workers answered.
 */
async function tableSteps(server: LeafServerProcess, tag: string): Promise<Map<number, number>> {
  const steps = new Map<number, number>();
  for (let i = 0; i < 20 && steps.size < 2; i++) {
    const view = await workerTagView(server.port, tag);
    if (view?.tag) steps.set(view.slot, view.tag.tableStep);
  }
  return steps;
}
