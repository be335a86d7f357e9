// Fixed mode against a private MariaDB: the Java fork's leaf_workerid_alloc as it is, the start
// check, the worker range, one live process per ip:port, distinct ids under contention, and the
// cache file used when MySQL cannot be reached (only after its timestamp check, unlike Leaf #97).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCodes, isLeafError, LeafError, ManualClock } from "@leaf/core";
import {
  ChildLines,
  freePort,
  type MysqlHandle,
  spawnNode,
  startMysql,
  stopAll,
} from "@leaf/testkit";
import { createConnection, type RowDataPacket } from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createSchema,
  type FixedLease,
  fixedLockName,
  MysqlRegistry,
  type MysqlRegistryOptions,
  schemaSql,
} from "../src/index";

let mysql: MysqlHandle;
const cacheRoot = mkdtempSync(join(tmpdir(), "leaf-mysql-fixed-"));
const holderScript = join(import.meta.dirname, "fixtures/holder.ts");

beforeAll(async () => {
  mysql = await startMysql({ useEnv: false });
});
afterAll(async () => {
  await stopAll();
  rmSync(cacheRoot, { recursive: true, force: true });
});

let counter = 0;
/** A fresh database with the fixed-mode table, and a cache folder of its own. */
async function setup() {
  const db = await mysql.createDatabase("leaf_fixed");
  await createSchema(mysql.urlFor(db), { mode: "fixed" });
  const cacheDir = join(cacheRoot, `c${counter++}`);
  const registry = (extra: Partial<MysqlRegistryOptions<"fixed">> = {}) =>
    new MysqlRegistry({ mode: "fixed", url: mysql.urlFor(db), cacheDir, ...extra });
  return { db, cacheDir, registry };
}

const node = (ip = "10.1.46.33", port = 8080) => ({ name: "orders", ip, port });

async function sql<T extends RowDataPacket[]>(db: string, text: string, params: unknown[] = []) {
  const connection = await createConnection(mysql.connectionOptions(db));
  try {
    const [rows] = await connection.query<T>(text, params);
    return rows;
  } finally {
    await connection.end();
  }
}

async function rejection(promise: Promise<unknown>): Promise<LeafError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (error instanceof LeafError) return error;
  throw new Error(`expected a LeafError, got ${String(error)}`);
}

describe("fixed mode", () => {
  it("uses the fork's table as it is: the worker id is the row id of the node's ip:port", async () => {
    const { db, registry } = await setup();
    // Rows a Java Leaf fork wrote before the migration.
    const stored = Date.now() - 60_000;
    await sql(
      db,
      "INSERT INTO leaf_workerid_alloc (id, ip, port, ip_port, max_timestamp, create_time, update_time) " +
        "VALUES (1, '10.1.46.30', '8080', '10.1.46.30:8080', 1, NOW(), NOW()), " +
        "(2, '10.1.46.33', '8080', '10.1.46.33:8080', ?, NOW(), NOW())",
      [stored],
    );
    const r = registry();
    const lease = await r.acquire({ node: node(), maxWorkerId: 1023 });
    expect(lease.workerId).toBe(2);
    expect(lease.lastTimestamp).toBe(stored);
    const reported = Date.now();
    await lease.report(reported);
    await lease.report(reported - 5_000);
    const [row] = await sql(db, "SELECT max_timestamp FROM leaf_workerid_alloc WHERE id = 2");
    expect(Number(row!.max_timestamp)).toBe(reported);
    // A node the table has never seen gets the next row.
    const other = await r.acquire({ node: node("10.1.46.40", 9000), maxWorkerId: 1023 });
    expect(other.workerId).toBe(3);
    const [inserted] = await sql(
      db,
      "SELECT ip, port, ip_port FROM leaf_workerid_alloc WHERE id = 3",
    );
    expect(inserted).toMatchObject({ ip: "10.1.46.40", port: "9000", ip_port: "10.1.46.40:9000" });
    await lease.release();
    await other.release();
    await r.close();
  });

  it("refuses to start when max_timestamp is ahead of the clock, showing both times", async () => {
    const { db, registry } = await setup();
    const ahead = Date.now() + 3_600_000;
    await sql(
      db,
      "INSERT INTO leaf_workerid_alloc (ip, port, ip_port, max_timestamp) VALUES ('10.1.46.33', '8080', '10.1.46.33:8080', ?)",
      [ahead],
    );
    const clock = new ManualClock(Date.now());
    const r = registry({ clock });
    // Opened first, so the check below runs the moment the refusal returns.
    const watcher = await createConnection(mysql.connectionOptions(db));
    const error = await rejection(r.acquire({ node: node(), maxWorkerId: 1023 }));
    const [[lock]] = await watcher.query<RowDataPacket[]>("SELECT IS_USED_LOCK(?) AS holder", [
      fixedLockName(db, "leaf_workerid_alloc", 1),
    ]);
    await watcher.end();
    // Freed before the refusal returned, not whenever the server notices the closed connection.
    expect(lock!.holder).toBeNull();
    expect(error.code).toBe(ErrorCodes.CLOCK_BEHIND_LEASE);
    expect(error.message).toContain(new Date(ahead).toISOString());
    expect(error.message).toContain(new Date(clock.now()).toISOString());
    expect(error.message).toContain("max_timestamp of 10.1.46.33:8080");
    // The refused start does not keep the worker id locked.
    clock.set(ahead + 1);
    const lease = await r.acquire({ node: node(), maxWorkerId: 1023 });
    expect(lease.workerId).toBe(1);
    await lease.release();
    await r.close();
  });

  it("fails with a clear error when the node's row id is beyond the layout's worker range", async () => {
    const { db, registry } = await setup();
    await sql(db, "ALTER TABLE leaf_workerid_alloc AUTO_INCREMENT = 1024");
    const r = registry();
    const error = await rejection(r.acquire({ node: node(), maxWorkerId: 1023 }));
    expect(error.code).toBe(ErrorCodes.WORKER_IDS_EXHAUSTED);
    expect(error.message).toContain("worker id 1024");
    expect(error.message).toContain("0..1023");
    expect(error.message).toContain('mode "lease"');
    await r.close();
  });

  it("refuses a second live process with the same ip:port, and lets it in once the first is gone", async () => {
    const { db, cacheDir, registry } = await setup();
    const first = new ChildLines(
      spawnNode(holderScript, [], {
        env: {
          HOLDER: JSON.stringify({
            registry: { mode: "fixed", url: mysql.urlFor(db), cacheDir },
            ...node(),
          }),
        },
      }),
    );
    await first.until((lines) => lines.includes('{"ready":true}'), "ready");
    first.child.stdin!.write("go\n");
    await first.until((lines) => lines.some((l) => l.includes('"ok":true')), "the first holder");
    const r = registry();
    const error = await rejection(r.acquire({ node: node(), maxWorkerId: 1023 }));
    expect(error.code).toBe(ErrorCodes.WORKER_ID_IN_USE);
    expect(error.message).toContain("held by another live process");
    await first.kill();
    // The dead process's session, and with it the lock, ends as soon as the server sees it close.
    let lease: FixedLease | undefined;
    for (let attempt = 0; attempt < 100 && !lease; attempt++) {
      lease = await r.acquire({ node: node(), maxWorkerId: 1023 }).catch((e: unknown) => {
        if (!isLeafError(e, ErrorCodes.WORKER_ID_IN_USE)) throw e;
        return new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 50));
      });
    }
    expect(lease?.workerId).toBe(1);
    await lease!.release();
    await r.close();
  });

  it("gives eight processes acquiring at once eight distinct worker ids", async () => {
    const { db, cacheDir } = await setup();
    const children = Array.from(
      { length: 8 },
      (_, i) =>
        new ChildLines(
          spawnNode(holderScript, [], {
            env: {
              HOLDER: JSON.stringify({
                registry: { mode: "fixed", url: mysql.urlFor(db), cacheDir },
                ...node(`10.1.47.${i + 1}`),
              }),
            },
          }),
        ),
    );
    await Promise.all(children.map((c) => c.until((l) => l.includes('{"ready":true}'), "ready")));
    for (const child of children) child.child.stdin!.write("go\n");
    await Promise.all(children.map((c) => c.until((l) => l.some((x) => x.includes('"ok"')), "ok")));
    const outcomes = children.map((c) => c.json<{ ok: boolean; workerId: number }>()[1]!);
    expect(outcomes.every((o) => o.ok)).toBe(true);
    expect(new Set(outcomes.map((o) => o.workerId)).size).toBe(8);
    await Promise.all(children.map((c) => c.kill()));
  });
});

describe("fixed mode when MySQL cannot be reached at start", () => {
  async function leaseThenRelease(final: number) {
    const context = await setup();
    const r = context.registry();
    const lease = await r.acquire({ node: node(), maxWorkerId: 1023 });
    await lease.release(final);
    await r.close();
    const deadPort = await freePort();
    const offline = (extra: Partial<MysqlRegistryOptions<"fixed">> = {}) =>
      context.registry({ url: `mysql://root@127.0.0.1:${deadPort}/x`, ...extra });
    return { ...context, workerId: lease.workerId, cacheFile: lease.cacheFile!, offline };
  }

  it("starts from the cache file after checking its timestamp against the clock", async () => {
    const final = Date.now() - 1000;
    const { workerId, cacheFile, offline } = await leaseThenRelease(final);
    expect(JSON.parse(readFileSync(cacheFile, "utf8"))).toMatchObject({
      workerId,
      timestamp: final,
      registry: "mysql",
    });
    const r = offline();
    const lease = await r.acquire({ node: node(), maxWorkerId: 1023 });
    expect(lease.fromCache).toBe(true);
    expect(lease.workerId).toBe(workerId);
    expect(lease.lastTimestamp).toBe(final);
    // Reports keep the cache file current while MySQL stays away, and say MySQL is unavailable.
    const error = await rejection(lease.report(final + 500));
    expect(error.code).toBe(ErrorCodes.UNAVAILABLE);
    expect(JSON.parse(readFileSync(cacheFile, "utf8")).timestamp).toBe(final + 500);
    await lease.release();
    await r.close();
  });

  it("starts after ids issued while MySQL was down, once it is back", async () => {
    const final = Date.now() - 10_000;
    const { registry, offline, workerId } = await leaseThenRelease(final);
    const r = offline();
    const away = await r.acquire({ node: node(), maxWorkerId: 1023 });
    await away.report(final + 5000).catch(() => {});
    await away.release();
    await r.close();
    // The table still says `final`; the cache file knows better.
    const back = registry();
    const lease = await back.acquire({ node: node(), maxWorkerId: 1023 });
    expect(lease.workerId).toBe(workerId);
    expect(lease.lastTimestamp).toBe(final + 5000);
    await lease.release();
    await back.close();
  });

  it("refuses the cache file when its timestamp is ahead of the clock (Leaf #97 skipped this)", async () => {
    const clock = new ManualClock(Date.now());
    const { offline } = await leaseThenRelease(clock.now() + 120_000);
    const error = await rejection(offline({ clock }).acquire({ node: node(), maxWorkerId: 1023 }));
    expect(error.code).toBe(ErrorCodes.CLOCK_BEHIND_LEASE);
    expect(error.message).toContain("cache file");
    expect(error.message).toContain("MySQL unreachable");
    expect(error.message).toContain(new Date(clock.now() + 120_000).toISOString());
  });

  it("fails with UNAVAILABLE when this node has no cache file", async () => {
    const port = await freePort();
    const r = new MysqlRegistry({
      mode: "fixed",
      url: `mysql://root@127.0.0.1:${port}/x`,
      cacheDir: join(cacheRoot, "empty"),
    });
    const error = await rejection(r.acquire({ node: node(), maxWorkerId: 1023 }));
    expect(error.code).toBe(ErrorCodes.UNAVAILABLE);
    expect(error.message).toContain("no fallback");
    expect(error.message).toContain("ECONNREFUSED");
  });

  it("does not fall back when MySQL answers but refuses: a missing table is a configuration error", async () => {
    const { cacheDir, workerId } = await leaseThenRelease(Date.now() - 1000);
    expect(workerId).toBe(1);
    const empty = await mysql.createDatabase("leaf_fixed_empty");
    const r = new MysqlRegistry({ mode: "fixed", url: mysql.urlFor(empty), cacheDir });
    const error = await rejection(r.acquire({ node: node(), maxWorkerId: 1023 }));
    expect(error.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(error.message).toContain("createSchema");
    await r.close();
  });

  it("takes the lock and raises max_timestamp once MySQL is back", async () => {
    const { db, registry, workerId } = await leaseThenRelease(Date.now() - 1000);
    const r = registry({ queryTimeoutMs: 1000 });
    await mysql.stop();
    let lease: FixedLease;
    try {
      lease = await r.acquire({ node: node(), maxWorkerId: 1023 });
    } finally {
      await mysql.start();
    }
    expect(lease.fromCache).toBe(true);
    expect(lease.lockName).toBeUndefined();
    const reported = Date.now();
    await lease.report(reported);
    expect(lease.lockName).toContain(`:${workerId}`);
    const [row] = await sql(db, "SELECT max_timestamp FROM leaf_workerid_alloc WHERE id = ?", [
      workerId,
    ]);
    expect(Number(row!.max_timestamp)).toBe(reported);
    // With the lock back, a second process as the same node is refused again.
    const error = await rejection(registry().acquire({ node: node(), maxWorkerId: 1023 }));
    expect(error.code).toBe(ErrorCodes.WORKER_ID_IN_USE);
    await lease.release();
    await r.close();
  });
});

describe("schema and connection settings", () => {
  it("ships sql/ files holding exactly the statements createSchema runs", () => {
    const dir = join(import.meta.dirname, "../sql");
    expect(readFileSync(join(dir, "leaf_workerid_alloc.sql"), "utf8")).toBe(schemaSql("fixed"));
    expect(readFileSync(join(dir, "leaf_worker_lease.sql"), "utf8")).toBe(schemaSql("lease"));
  });

  it("creates the tables once and leaves them alone after", async () => {
    const db = await mysql.createDatabase("leaf_schema");
    for (let i = 0; i < 2; i++) {
      await createSchema(mysql.urlFor(db), { mode: "fixed" });
      await createSchema(mysql.urlFor(db), { mode: "lease", table: "custom_lease" });
    }
    const tables = await sql(db, "SHOW TABLES");
    expect(tables.map((t) => Object.values(t)[0]).sort()).toEqual([
      "custom_lease",
      "leaf_workerid_alloc",
    ]);
  });

  it("accepts Leaf's JDBC url with the user given apart", async () => {
    const { db, cacheDir } = await setup();
    const r = new MysqlRegistry({
      mode: "fixed",
      url: `jdbc:mysql://127.0.0.1:${mysql.port}/${db}?useUnicode=true&characterEncoding=utf8`,
      user: "root",
      cacheDir,
    });
    const lease = await r.acquire({ node: node(), maxWorkerId: 1023 });
    expect(lease.workerId).toBe(1);
    await lease.release();
    await r.close();
  });

  it("names the key and the value of a bad option", () => {
    const bad = (options: Partial<MysqlRegistryOptions>) => {
      try {
        new MysqlRegistry({ mode: "lease", url: "mysql://x@127.0.0.1/x", ...options });
      } catch (error) {
        return (error as Error).message;
      }
      return "no error";
    };
    expect(bad({ mode: "recycle" as "lease" })).toContain('invalid mode: "recycle"');
    expect(bad({ leaseMs: 2000, safetyMarginMs: 2000 })).toContain("invalid safetyMarginMs: 2000");
    expect(bad({ leaseMs: 2000, renewIntervalMs: 1900 })).toContain("invalid renewIntervalMs");
    expect(bad({ table: "leaf; DROP" })).toContain("invalid table");
    expect(bad({ url: "postgres://x/y" })).toContain("invalid url");
    expect(bad({ url: undefined })).toContain("invalid url: undefined");
    expect(bad({ url: undefined, client: {} as never })).toContain("a mysql2 promise Pool");
    expect(bad({ poolOptions: "ssl" as never })).toContain("invalid poolOptions");
    expect(bad({ url: "mysql://u:s3cret@h1,h2/leaf" })).toContain("a URL with one host");
    expect(bad({ url: "mysql://u:s3cret@h:99999/leaf" })).toContain("mysql://u:***@h");
    expect(bad({ url: "mysql://u:s3cret@h:99999/leaf" })).not.toContain("s3cret");
  });
});
