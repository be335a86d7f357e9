// Capacity warnings ahead of time: a layout that runs out within years, a registry whose worker ids
// are all handed out, a tag close to max_id 2^63 - 1. Each is logged at start or at the periodic
// check (once an hour while it holds), shown as a metric and in the monitor's data.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { MAX_ID } from "@leaf/segment";
import { type MysqlHandle, startMysql, stopAll } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { type LeafServer, loadConfig, startServer } from "../src/index";
import { merge } from "./helpers";

const ADMIN = "admin-token-0123456789abcdef";
const YEAR_MS = 365.25 * 24 * 3600 * 1000;
const dirs: string[] = [];
let mysql: MysqlHandle | undefined;

afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A started server whose warn-level log lines are kept as parsed JSON. */
async function start(values: Record<string, unknown>) {
  const dir = mkdtempSync(join(tmpdir(), "leaf-capacity-"));
  dirs.push(dir);
  const logs: Array<{ msg: string; capacity?: string; level: number }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n")) if (line) logs.push(JSON.parse(line));
      done();
    },
  });
  const config = loadConfig({
    values: merge({ server: { port: 0, drainMs: 0, adminToken: ADMIN }, dataDir: dir }, values),
    env: {},
  });
  const server = await startServer(config, { logger: { level: "warn", stream } });
  const capacityLogs = (subject: string) => logs.filter((l) => l.capacity === subject);
  return { server, logs, capacityLogs };
}

async function scrape(server: LeafServer): Promise<string> {
  return (await fetch(`${server.url}/metrics`)).text();
}

async function monitorCapacity(server: LeafServer) {
  const data = (await (await fetch(`${server.url}/api/v1/monitor`)).json()) as {
    capacity: { warnings: Array<{ subject: string; message: string }> };
  };
  return data.capacity;
}

describe("capacity warnings", () => {
  it("warns at start when the snowflake layout runs out within five years", async () => {
    // 40 bits of ms last about 34.8 years: an epoch that leaves two of them.
    const lastInstant = Date.now() + 2 * YEAR_MS;
    const epoch = Math.round(lastInstant - (2 ** 40 - 1));
    const { server, capacityLogs } = await start({
      segment: { enabled: false },
      snowflake: { timestampBits: 40, epoch },
    });
    try {
      await expect.poll(() => capacityLogs("layout").length, { timeout: 10_000 }).toBe(1);
      const [line] = capacityLogs("layout");
      expect(line!.level).toBe(40);
      expect(line!.msg).toMatch(
        /snowflake layout .* runs out on \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC, in 2\.0 years/,
      );
      const text = await scrape(server);
      expect(text).toContain('leaf_capacity_warning{subject="layout"} 1');
      const left = Number(/^leaf_snowflake_layout_seconds_left (\S+)$/m.exec(text)![1]);
      expect(Math.abs(left - (2 * YEAR_MS) / 1000)).toBeLessThan(3600);
      const capacity = await monitorCapacity(server);
      expect(capacity.warnings.map((w) => w.subject)).toEqual(["layout"]);
      // Still true at the next check, but logged again only after an hour.
      await server.context.metrics.capacity.check();
      expect(capacityLogs("layout")).toHaveLength(1);
      await server.context.metrics.capacity.check(Date.now() + 3_600_001);
      expect(capacityLogs("layout")).toHaveLength(2);
    } finally {
      await server.close();
    }
  });

  it("says nothing about a layout with decades left", async () => {
    const { server, logs } = await start({ segment: { enabled: false } });
    try {
      await server.context.metrics.capacity.check();
      expect(logs.filter((l) => l.capacity !== undefined)).toEqual([]);
      expect(await scrape(server)).not.toContain("leaf_capacity_warning{");
    } finally {
      await server.close();
    }
  });

  it("warns when the registry has handed out its last worker id (MySQL fixed mode never gives one back)", async () => {
    mysql ??= await startMysql({ useEnv: false });
    const database = await mysql.createDatabase("leaf_capacity");
    const values = {
      segment: { enabled: false },
      // One worker bit: two worker ids in the whole space.
      snowflake: {
        workerBits: 1,
        registry: "mysql",
        mysql: {
          url: `mysql://${mysql.host}:${mysql.port}/${database}`,
          username: mysql.user,
          password: mysql.password ?? "",
          createTable: true,
        },
      },
    };
    const started: Array<Awaited<ReturnType<typeof start>>> = [];
    try {
      // Nodes (distinct ports, so distinct rows) until one holds the space's last id.
      for (let i = 0; i < 2; i++) {
        const node = await start(values);
        started.push(node);
        if (node.server.services.snowflake!.worker.lease!.workerId === 1) break;
      }
      const last = started.at(-1)!;
      expect(last.server.services.snowflake!.worker.lease!.workerId).toBe(1);
      await expect.poll(() => last.capacityLogs("worker-ids").length, { timeout: 10_000 }).toBe(1);
      expect(last.capacityLogs("worker-ids")[0]!.msg).toMatch(
        /0 of 2 worker ids left in the mysql registry \(fixed mode never gives an id back; this node holds 1\)/,
      );
      const text = await scrape(last.server);
      expect(text).toContain('leaf_snowflake_worker_ids_left{registry="mysql",mode="fixed"} 0');
      expect(text).toContain("leaf_snowflake_worker_ids 2");
      expect(text).toContain('leaf_capacity_warning{subject="worker-ids"} 1');
      expect((await monitorCapacity(last.server)).warnings.map((w) => w.subject)).toContain(
        "worker-ids",
      );
    } finally {
      for (const node of started.reverse()) await node.server.close();
    }
  });

  it("warns when a tag's max_id headroom lasts fewer than five years at its current rate", async () => {
    const { server, capacityLogs } = await start({ snowflake: { enabled: false } });
    try {
      const tag = "near-the-end";
      const startId = MAX_ID - 1_000_000_000n;
      const created = await server.app.inject({
        method: "POST",
        url: "/api/v1/admin/tags",
        headers: { authorization: `Bearer ${ADMIN}` },
        payload: { tag, step: 1000, startId: startId.toString() },
      });
      expect(created.statusCode).toBe(201);
      // Idle: no rate, so no time-based warning yet.
      await server.context.metrics.capacity.check();
      expect(capacityLogs(`max-id:${tag}`)).toHaveLength(0);
      let issued = 0;
      let lastId = 0n;
      for (let i = 0; i < 5; i++) {
        const body = (await fetch(`${server.url}/api/segment/get/${tag}?count=1000`).then((r) =>
          r.text(),
        )) as string;
        const ids = body.trimEnd().split("\n").map(BigInt);
        issued += ids.length;
        lastId = ids.at(-1)!;
      }
      expect(issued).toBe(5000);
      expect(lastId).toBeGreaterThan(startId);
      // Once the activity has sampled the ids, the rate gives 10^9 ids a few days.
      await expect
        .poll(
          async () => {
            await server.context.metrics.capacity.check();
            return capacityLogs(`max-id:${tag}`).length;
          },
          { timeout: 10_000, interval: 300 },
        )
        .toBe(1);
      const msg = capacityLogs(`max-id:${tag}`)[0]!.msg;
      expect(msg).toMatch(/tag "near-the-end" has \d+ ids left below max_id 2\^63 - 1/);
      expect(msg).toMatch(/at this node's [\d.]+ ids\/s they last \d+ days/);
      const text = await scrape(server);
      expect(text).toContain(`leaf_capacity_warning{subject="max-id:${tag}"} 1`);
      const headroom = Number(
        new RegExp(`^leaf_segment_max_id_headroom\\{tag="${tag}"\\} (\\S+)$`, "m").exec(text)![1],
      );
      expect(headroom).toBeLessThanOrEqual(1_000_000_000);
      expect(headroom).toBeGreaterThan(999_000_000);
      const seconds = Number(
        new RegExp(`^leaf_segment_max_id_headroom_seconds\\{tag="${tag}"\\} (\\S+)$`, "m").exec(
          text,
        )![1],
      );
      expect(seconds).toBeGreaterThan(0);
      expect(seconds).toBeLessThan(5 * YEAR_MS);
      const days = Number(
        new RegExp(`^leaf_segment_max_id_headroom_days\\{tag="${tag}"\\} (\\S+)$`, "m").exec(
          text,
        )![1],
      );
      expect(days).toBeCloseTo(seconds / 86_400, 0);
      const shown = (await monitorCapacity(server)) as unknown as {
        tags: Array<{ tag: string; headroomDays: number | null; usedUp: boolean }>;
      };
      const row = shown.tags.find((t) => t.tag === tag)!;
      expect(row.usedUp).toBe(false);
      expect(row.headroomDays).toBeGreaterThan(0);
      // The demo tag, far from the end, has no warning.
      expect(text).not.toContain('subject="max-id:leaf-segment-test"');
    } finally {
      await server.close();
    }
  });

  it("judges a tag shared by several nodes at the store's max_id growth, also on a node that issues none of it", async () => {
    mysql ??= await startMysql({ useEnv: false });
    const database = await mysql.createDatabase("leaf_capacity");
    // A fixed step: with the dynamic step the prefetched ranges of the busy node grow the store's
    // max_id by up to millions in the minute, and the headroom left reads in hours.
    const values = {
      snowflake: { enabled: false },
      segment: {
        dynamicStep: false,
        mysql: {
          url: `mysql://${mysql.host}:${mysql.port}/${database}`,
          username: mysql.user,
          password: mysql.password ?? "",
          createTable: true,
        },
      },
    };
    const idle = await start(values);
    const busy = await start(values);
    try {
      const tag = "shared";
      const created = await busy.server.app.inject({
        method: "POST",
        url: "/api/v1/admin/tags",
        headers: { authorization: `Bearer ${ADMIN}` },
        payload: { tag, step: 1000, startId: (MAX_ID - 1_000_000_000n).toString() },
      });
      expect(created.statusCode).toBe(201);
      await idle.server.services.segment!.generator.refresh();
      // The idle node reads the store's max_id, then again a minute later (its clock, given).
      const t0 = Date.now();
      await idle.server.context.metrics.capacity.check(t0);
      for (let i = 0; i < 50; i++) {
        const res = await fetch(`${busy.server.url}/api/v1/segment/${tag}/ids?count=1000`);
        expect(res.status).toBe(200);
      }
      const view = await idle.server.context.metrics.capacity.check(t0 + 60_000);
      const row = view.tags.find((t) => t.tag === tag)!;
      expect(row.nodeIdsPerSecond).toBe(0);
      // 50 ranges of 1,000 (and the next ones loaded ahead) in a minute: at least 833 ids/s.
      expect(row.storeIdsPerSecond).toBeGreaterThanOrEqual(50_000 / 60);
      expect(row.headroomDays).toBeLessThan(5 * 365.25);
      const logged = idle.capacityLogs(`max-id:${tag}`);
      expect(logged).toHaveLength(1);
      expect(logged[0]!.msg).toMatch(
        /at the store's max_id growth of [\d.]+ ids\/s \(all nodes\) they last \d+ days/,
      );
    } finally {
      await idle.server.close();
      await busy.server.close();
    }
  });

  it("warns about a used-up tag whatever its rate, and refuses to create one", async () => {
    const { server, capacityLogs } = await start({ snowflake: { enabled: false } });
    const create = (tag: string, step: number, startId: bigint) =>
      server.app.inject({
        method: "POST",
        url: "/api/v1/admin/tags",
        headers: { authorization: `Bearer ${ADMIN}` },
        payload: { tag, step, startId: startId.toString() },
      });
    try {
      // Within one step of the end: no range would fit, so the tag is refused, naming the bound.
      const refused = await create("too-late", 10, MAX_ID - 9n);
      expect(refused.statusCode).toBe(400);
      expect(refused.json()).toMatchObject({ code: "INVALID_ARGUMENT" });
      expect(refused.json().message).toContain(
        `at most ${MAX_ID - 10n} (2^63 - 1 minus the step 10)`,
      );
      // Exactly one range fits: created, and used up after it.
      expect((await create("last-range", 10, MAX_ID - 10n)).statusCode).toBe(201);
      const ids = await fetch(`${server.url}/api/v1/segment/last-range/ids?count=10`);
      expect(ids.status).toBe(200);
      const gone = await fetch(`${server.url}/api/v1/segment/last-range/id`);
      expect(gone.status).toBe(410);
      expect(gone.headers.get("retry-after")).toBeNull();
      expect(await gone.json()).toMatchObject({ code: "TAG_EXHAUSTED", leafCode: -3 });
      await server.context.metrics.capacity.check();
      const logged = capacityLogs("max-id:last-range");
      expect(logged).toHaveLength(1);
      expect(logged[0]!.msg).toMatch(/tag "last-range" is used up: no range of its step fits/);
      const text = await scrape(server);
      expect(text).toContain('leaf_capacity_warning{subject="max-id:last-range"} 1');
      expect(text).toContain('leaf_segment_max_id_headroom_days{tag="last-range"} 0');
    } finally {
      await server.close();
    }
  });
});
