// A graceful stop's give-back that times out behind a row lock is never sent twice (issue 24 item
// 1), with real server processes on one MariaDB. A holds one unused range when it gets SIGTERM while
// another session holds the tag's row locked (`SELECT ... FOR UPDATE`); its give-back waits behind
// the lock past the store's 5 s query timeout. B's first request queues behind it; the lock is
// released; a fresh C takes a range. Sent a second time, the give-back would run after B's range and
// set max_id back under it, and C would hand out B's ids again. Every id answered is counted.
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MysqlSegmentStore } from "@leaf/segment-mysql";
import { countDuplicates, freePort, type MysqlHandle, startMysql, stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serverProcess, sleep, until } from "./fault-servers";

/** A plain SQL session, for the row lock: mysql2 as the test kit has it (the server does not). */
interface SqlSession {
  query(sql: string): Promise<[Array<Record<string, unknown>>, unknown]>;
  end(): Promise<void>;
}
const mysql2 = createRequire(import.meta.resolve("@leaf/testkit"))("mysql2/promise") as {
  createConnection(options: object): Promise<SqlSession>;
};

let db: MysqlHandle;
const dirs: string[] = [];

beforeAll(async () => {
  db = await startMysql({ useEnv: false });
}, 180_000);

afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** `count` ids of tag t from the server on `port`, as bigints; throws on anything but 200. */
async function ids(port: number, count: number): Promise<bigint[]> {
  const response = await fetch(`http://127.0.0.1:${port}/api/segment/get/t?count=${count}`);
  const body = await response.text();
  if (response.status !== 200) throw new Error(`answer ${response.status}: ${body}`);
  return body
    .trim()
    .split("\n")
    .map((line) => BigInt(line));
}

describe("give-back on SIGTERM while the row is locked (server processes, MariaDB)", () => {
  it("is sent once: the range B takes after it is never handed out again by a fresh C", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-give-back-lock-"));
    dirs.push(dir);
    const database = await db.createDatabase("leaf_give_back_lock");
    const url = db.urlFor(database);
    const setup = new MysqlSegmentStore({ url, user: db.user, password: db.password ?? "" });
    await setup.createSchema();
    await setup.createTag({ tag: "t", step: 1000, startId: 1n });
    await setup.close();
    const config = {
      snowflake: { enabled: false },
      segment: {
        mysql: { url, username: db.user, password: db.password ?? "" },
        // A tag's first range on its first request: B takes none before the lock.
        load: "lazy",
        // One range of the table's step at a time, so that the range held is exactly one step.
        dynamicStep: false,
        prefetchMaxDepth: 1,
        giveBackOnClose: true,
        exhaustedWaitMs: 60_000,
      },
    };
    const a = serverProcess("A", dir, await freePort(), config);
    const b = serverProcess("B", dir, await freePort(), config);
    const c = serverProcess("C", dir, await freePort(), config);
    const admin = await mysql2.createConnection({
      ...db.connectionOptions(database),
      supportBigNumbers: true,
      bigNumberStrings: true,
    });
    const answered: bigint[][] = [];
    try {
      await Promise.all([a.start(), b.start()]);
      // A hands out its first range whole; the range preloaded, [1001, 2001), stays unused.
      for (let i = 0; i < 10; i++) answered.push(await ids(a.port, 100));
      expect(answered.flat().at(-1)).toBe(1000n);
      // The preload of [1001, 2001) starts as the first range runs low; on a busy machine it may
      // still be on its way when the last id is answered.
      let maxId: unknown;
      await until("A's preloaded range in the table", async () => {
        const [rows] = await admin.query("SELECT max_id FROM leaf_alloc WHERE biz_tag = 't'");
        maxId = rows[0]!.max_id;
        return maxId !== "1001";
      });
      expect(maxId).toBe("2001");

      await admin.query("START TRANSACTION");
      await admin.query("SELECT max_id FROM leaf_alloc WHERE biz_tag = 't' FOR UPDATE");
      const stopped = a.stop(); // its give-back of [1001, 2001) waits behind the lock
      await sleep(2000);
      const fromB = ids(b.port, 500); // B's first range request queues behind the give-back
      // Past A's 5 s query timeout: a store that sends the give-back again has queued it by now.
      await sleep(4500);
      await admin.query("COMMIT");
      answered.push(await fromB);
      await stopped;

      await c.start();
      answered.push(await ids(c.port, 500));
    } finally {
      await admin.end();
      await Promise.all([a.stop(), b.stop(), c.stop()]);
    }
    const counted = countDuplicates(answered);
    expect(counted.total).toBe(2000);
    expect({ duplicates: counted.duplicates, examples: counted.examples }).toEqual({
      duplicates: 0,
      examples: [],
    });
    // The one copy of the give-back ran once the lock was released: B continued right after A's
    // last id, and C after B's ranges ([1001, 2001) and the one it preloaded, [2001, 3001)).
    expect(answered[10]![0]).toBe(1001n);
    expect(answered[11]![0]).toBe(3001n);
  }, 240_000);
});
