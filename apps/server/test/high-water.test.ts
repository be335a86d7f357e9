// Issue 32: a restarted node remembers how far each tag went. Two real server processes take ranges
// from one MariaDB under load; max_id is moved back to 1 by hand and both are restarted (SIGTERM, or
// SIGKILL). Every id answered is counted: with the high-water marks in their data folders the tag
// is refused (CORRUPT_DATA, logged at error) until the row is fixed; with the folders lost (a fresh
// container) the same restart hands the ids out again, which is why the folder must be kept.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSchema } from "@leaf/segment-mysql";
import {
  countDuplicates,
  freePort,
  type LeafServerProcess,
  type MysqlHandle,
  startMysql,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig, startServer } from "../src/index";
import { Load, serverProcess, sleep, until } from "./fault-servers";

// The test kit's MariaDB client (the server itself needs none), typed for what this test uses.
interface SqlPool {
  query(sql: string, values?: unknown[]): Promise<[Array<Record<string, unknown>>, unknown]>;
  end(): Promise<void>;
}
const kitRequire = createRequire(import.meta.resolve("@leaf/testkit"));
const mysql2 = kitRequire("mysql2/promise") as { createPool(options: object): SqlPool };

const TAG = "hw";
const BATCH = `/api/segment/get/${TAG}?count=50`;
const dirs: string[] = [];
let db: MysqlHandle;
let database: string;
let admin: SqlPool;
let tables = 0;

beforeAll(async () => {
  db = await startMysql({ useEnv: false });
  database = await db.createDatabase("server_high_water");
  admin = mysql2.createPool({
    ...db.connectionOptions(database),
    connectionLimit: 2,
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
}, 180_000);

afterAll(async () => {
  await admin?.end().catch(() => {});
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function maxId(table: string): Promise<bigint> {
  const [rows] = await admin.query(`SELECT max_id FROM ${table} WHERE biz_tag = ?`, [TAG]);
  return BigInt(rows[0]!.max_id as string);
}

/** Two servers on a new table holding the tag at 1 (step 1,000), each with its own data folder. */
async function twoServers(): Promise<{ table: string; servers: LeafServerProcess[] }> {
  const table = `leaf_alloc_${tables++}`;
  await createSchema({ url: db.urlFor(database), table });
  await admin.query(`INSERT INTO ${table} (biz_tag, max_id, step) VALUES (?, 1, 1000)`, [TAG]);
  const dir = mkdtempSync(join(tmpdir(), "leaf-high-water-"));
  dirs.push(dir);
  const config = {
    server: { host: "127.0.0.1", adminToken: "high-water-admin" },
    snowflake: { enabled: false },
    segment: {
      mysql: { url: db.urlFor(database), table, password: "" },
      dynamicStep: false,
      refreshIntervalMs: 1_000,
    },
    log: { level: "warn" },
  };
  const servers = [
    serverProcess("A", dir, await freePort(), config),
    serverProcess("B", dir, await freePort(), config),
  ];
  await Promise.all(servers.map((s) => s.start()));
  return { table, servers };
}

/** Loads both servers for `ms`; answers every id they answered, and the refused answers. */
async function load(servers: LeafServerProcess[], ms: number) {
  const loads = servers.map((s) => new Load(s.port, BATCH, 2, 4));
  await sleep(ms);
  await Promise.all(loads.map((l) => l.stop()));
  return {
    batches: loads.flatMap((l) => l.batches),
    ids: loads.reduce((n, l) => n + l.ids, 0),
    refused: loads.reduce((n, l) => n + l.refused, 0),
  };
}

async function restart(servers: LeafServerProcess[], how: "SIGTERM" | "SIGKILL") {
  await Promise.all(servers.map((s) => (how === "SIGKILL" ? s.kill() : s.stop())));
  return servers;
}

describe("two servers restarted after max_id was moved back by hand", () => {
  it.each(["SIGTERM", "SIGKILL"] as const)(
    "stopped with %s: the tag is refused until the row is fixed, no id answered twice",
    async (how) => {
      const { table, servers } = await twoServers();
      const first = await load(servers, 3_000);
      expect(first.ids).toBeGreaterThan(10_000);
      await restart(servers, how);
      const handedOut = await maxId(table);
      await admin.query(`UPDATE ${table} SET max_id = 1 WHERE biz_tag = ?`, [TAG]);
      await Promise.all(servers.map((s) => s.start()));

      const refused = await load(servers, 2_000);
      expect(refused.ids).toBe(0);
      expect(refused.refused).toBeGreaterThan(0);
      // Nothing was taken from the moved-back row.
      expect(await maxId(table)).toBe(1n);
      for (const s of servers) {
        const answer = await fetch(`${s.url}/api/v1/segment/${TAG}/id`);
        const body = (await answer.json()) as { code: string; message: string };
        expect(body.code).toBe("CORRUPT_DATA");
        expect(body.message).toMatch(/its max id is 1 in the mysql store, below \d+/);
        expect(body.message).toContain("segment-high-water");
        // Said at error level, and again at each refresh until the row is fixed.
        await until(
          "a second error line",
          () =>
            (readFileSync(s.logFile, "utf8").match(/"level":50.*not served/g) ?? []).length >= 2,
        );
      }

      await admin.query(`UPDATE ${table} SET max_id = ? WHERE biz_tag = ?`, [handedOut, TAG]);
      await until("both servers serve the fixed tag", async () => {
        const answers = await Promise.all(servers.map((s) => fetch(`${s.url}${BATCH}`)));
        return answers.every((a) => a.status === 200);
      });
      const after = await load(servers, 2_000);
      await restart(servers, "SIGTERM");
      const count = countDuplicates([...first.batches, ...refused.batches, ...after.batches]);
      console.log(
        `[high-water ${how}] ${count.total} ids, ${count.duplicates} answered twice, ${refused.refused} refused answers`,
      );
      expect(count.total).toBe(first.ids + after.ids);
      expect(count.duplicates).toBe(0);
    },
    180_000,
  );

  it("with the data folders lost (a fresh container), the same restart answers ids twice", async () => {
    const { table, servers } = await twoServers();
    const first = await load(servers, 3_000);
    await restart(servers, "SIGKILL");
    await admin.query(`UPDATE ${table} SET max_id = 1 WHERE biz_tag = ?`, [TAG]);
    for (const s of servers) rmSync(s.dataDir, { recursive: true, force: true });
    await Promise.all(servers.map((s) => s.start()));
    const second = await load(servers, 2_000);
    await restart(servers, "SIGTERM");
    const count = countDuplicates([...first.batches, ...second.batches]);
    console.log(`[high-water folders lost] ${count.total} ids, ${count.duplicates} answered twice`);
    expect(count.duplicates).toBeGreaterThan(0);
  }, 180_000);

  it("lists the marks and forgets one through the admin API", async () => {
    const table = `leaf_alloc_${tables++}`;
    await createSchema({ url: db.urlFor(database), table });
    await admin.query(`INSERT INTO ${table} (biz_tag, max_id, step) VALUES (?, 1, 1000)`, [TAG]);
    const dir = mkdtempSync(join(tmpdir(), "leaf-high-water-admin-"));
    dirs.push(dir);
    const auth = { authorization: "Bearer high-water-admin" };
    const start = () =>
      startServer(
        loadConfig({
          values: {
            server: { host: "127.0.0.1", port: 0, drainMs: 0, adminToken: "high-water-admin" },
            dataDir: dir,
            snowflake: { enabled: false },
            segment: { mysql: { url: db.urlFor(database), table, password: "" } },
          },
          env: {},
        }),
        { logger: false },
      );
    let server = await start();
    const first = await server.app.inject({ url: `/api/segment/get/${TAG}?count=10` });
    expect(first.statusCode).toBe(200);
    const marks = await server.app.inject({ url: "/api/v1/admin/high-water", headers: auth });
    expect(marks.json()).toMatchObject({ count: 1, marks: [{ tag: TAG }] });
    await server.close();
    await admin.query(`UPDATE ${table} SET max_id = 1 WHERE biz_tag = ?`, [TAG]);

    server = await start();
    const refused = await server.app.inject({ url: `/api/v1/segment/${TAG}/id` });
    expect(refused.json()).toMatchObject({ code: "CORRUPT_DATA" });
    // The operator decides the ids below the mark were never used (here: they were; a test only).
    const forgot = await server.app.inject({
      method: "DELETE",
      url: `/api/v1/admin/high-water/${TAG}`,
      headers: auth,
    });
    expect(forgot.json()).toEqual({ tag: TAG, forgotten: "11", refused: false });
    const served = await server.app.inject({ url: `/api/v1/segment/${TAG}/id` });
    expect(served.json()).toMatchObject({ tag: TAG, id: "1" });
    await server.close();
  });
});
