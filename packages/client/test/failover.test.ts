// Faults under load: several clients take ids from two real server processes on one private
// MariaDB while one server is SIGKILLed and restarted, the other restarted, and the database paused
// (SIGSTOP) for less time than the clients' caches last. Every id is kept and checked.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  countRepeatedIds,
  IdLog,
  type LeafServerProcess,
  type MysqlHandle,
  startMysql,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isLeafClientError, LeafClient, type SegmentIds } from "../src/index";
import { leafProcess } from "./leaf-processes";

const ADMIN = "client-failover-admin";
const TAG = "load";
const STEP = 5000;
const CLIENTS = 4;
/** Each client takes BURST ids, then waits PAUSE_MS: about 20,000 ids per second per client. */
const BURST = 100;
const PAUSE_MS = 5;
/** Seconds of ids per range: each client refills about twice a second... */
const TARGET_SECONDS = 0.5;
/** ...and keeps 6 ranges in reserve: its cache lasts about 3 s when a refill starts. */
const REFILL_THRESHOLD = 6;
/**
 * Shorter than the 3 s the cache lasts; far longer than the servers' own buffers (2 x 5000 ids).
 */
const DATABASE_PAUSE_MS = 1500;
/** The most the pause goes on after that until a client's refill failed (still within the 3 s). */
const DATABASE_PAUSE_MORE_MS = 1000;

let mysql: MysqlHandle;
let dir: string;
let a: LeafServerProcess;
let b: LeafServerProcess;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "leaf-client-failover-"));
  mysql = await startMysql({ useEnv: false });
  const database = await mysql.createDatabase("leaf_client");
  const config = {
    server: { adminToken: ADMIN },
    segment: {
      store: "mysql",
      mysql: { url: mysql.urlFor(database), password: mysql.password ?? "", createTable: true },
      demoTag: "",
      dynamicStep: false,
      refreshIntervalMs: 1000,
    },
    snowflake: { enabled: false },
  };
  a = await leafProcess("a", dir, config);
  b = await leafProcess("b", dir, config);
  await a.start();
  const created = await fetch(`${a.url}/api/v1/admin/tags`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify({ tag: TAG, step: STEP }),
  });
  expect(created.status, await created.text()).toBe(201);
  await b.start();
}, 180_000);

afterAll(async () => {
  await a?.kill();
  await b?.kill();
  await stopAll();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** One client taking ids at a steady rate, keeping every id and every error. */
class Loader {
  readonly client: LeafClient;
  readonly ids: SegmentIds;
  private readonly kept = new IdLog();
  readonly errors: unknown[] = [];
  private running = true;
  private readonly loop: Promise<void>;

  constructor(servers: string[]) {
    this.client = new LeafClient({
      servers,
      requestTimeoutMs: 500,
      timeoutMs: 5000,
      breaker: { failures: 2, openMs: 300 },
    });
    this.ids = this.client.segment(TAG, {
      targetSeconds: TARGET_SECONDS,
      refillThreshold: REFILL_THRESHOLD,
      minRangeSize: 1000,
    });
    this.loop = this.run();
  }

  keep(id: bigint): void {
    this.kept.push(id);
  }

  get taken(): number {
    return this.kept.count;
  }

  /** Takes ids with nextIdSync: the cache running dry at any moment is an error (CACHE_EMPTY). */
  private async run(): Promise<void> {
    await this.ids.start();
    while (this.running) {
      for (let i = 0; i < BURST; i++) {
        try {
          this.keep(this.ids.nextIdSync());
        } catch (error) {
          this.errors.push(error);
        }
      }
      await sleep(PAUSE_MS);
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  all(): IdLog {
    return this.kept;
  }
}

describe("clients under faults of the servers and the database", () => {
  it("see 0 errors once warm and 0 duplicate ids through a SIGKILL, two restarts and a database pause; then the typed error once every server is down past the cache", async () => {
    const loaders = Array.from({ length: CLIENTS }, () => new Loader([a.url, b.url]));
    const total = () => loaders.reduce((sum, l) => sum + l.taken, 0);
    const errorCount = () => loaders.reduce((sum, l) => sum + l.errors.length, 0);
    const serverFailures = () =>
      loaders.reduce((sum, l) => sum + l.client.servers().reduce((n, s) => n + s.failures, 0), 0);
    const phases: Record<string, { ids: number; errors: number; serverFailures: number }> = {};
    let mark = { ids: 0, errors: 0, serverFailures: 0 };
    /** Waits `ms`, then, with `until`, up to `moreMs` longer until it holds. */
    const phase = async (name: string, ms: number, until?: () => boolean, moreMs = 0) => {
      await sleep(ms);
      for (const end = Date.now() + moreMs; until && !until() && Date.now() < end; )
        await sleep(50);
      const now = { ids: total(), errors: errorCount(), serverFailures: serverFailures() };
      phases[name] = {
        ids: now.ids - mark.ids,
        errors: now.errors - mark.errors,
        serverFailures: now.serverFailures - mark.serverFailures,
      };
      mark = now;
    };

    await phase("warm-up", 2000);
    await a.kill();
    await phase("server a killed", 3000);
    await a.start();
    await phase("server a restarted", 2000);
    await b.stop();
    await phase("server b stopped", 1000);
    await b.start();
    await phase("server b restarted", 2000);
    mysql.pause();
    try {
      // On a loaded machine the clients take fewer ids per second and the servers' buffers last
      // longer than the pause: it lasts until a refill failed, within the cache's 3 s.
      await phase(
        "database paused",
        DATABASE_PAUSE_MS,
        () => serverFailures() > mark.serverFailures,
        DATABASE_PAUSE_MORE_MS,
      );
    } finally {
      mysql.resume();
    }
    await phase("database resumed", 3000);
    await Promise.all(loaders.map((l) => l.stop()));

    const errors = loaders.flatMap((l) => l.errors);
    console.log(`[client failover] per phase ${JSON.stringify(phases)}`);
    // A client that has just started knows no rate yet: its first ranges are small, and on a busy
    // machine a refill can arrive after they ran out (CACHE_EMPTY, as the README says of a cache
    // that could not be refilled in time). Once warm, no fault may empty a cache.
    expect(
      errors.filter((e) => (e as { code?: string }).code !== "CACHE_EMPTY").map(String),
    ).toEqual([]);
    for (const [name, n] of Object.entries(phases)) {
      expect(n.ids, `ids during "${name}"`).toBeGreaterThan(0);
      if (name !== "warm-up") expect(n.errors, `errors during "${name}"`).toBe(0);
    }
    // The faults reached the clients: their refills failed while a server was down and while the
    // database was paused; the cache carried the callers through.
    expect(phases["server a killed"]!.serverFailures).toBeGreaterThan(0);
    expect(phases["database paused"]!.serverFailures).toBeGreaterThan(0);

    // The end of the rows' ranges: every id handed out lies below it.
    const tags = (await (
      await fetch(`${b.url}/api/v1/admin/tags`, { headers: { authorization: `Bearer ${ADMIN}` } })
    ).json()) as
      | { tags?: Array<{ tag: string; maxId: string }> }
      | Array<{ tag: string; maxId: string }>;
    const rows = Array.isArray(tags) ? tags : (tags.tags ?? []);
    const maxId = BigInt(rows.find((r) => r.tag === TAG)!.maxId);

    // Every server down: the clients hand out what they hold, then fail with the typed error.
    await Promise.all([a.kill(), b.kill()]);
    const last = loaders[0]!;
    let failure: unknown;
    const before = last.taken;
    for (;;) {
      try {
        last.keep(await last.ids.nextId({ timeoutMs: 3000 }));
      } catch (error) {
        failure = error;
        break;
      }
    }
    expect(isLeafClientError(failure), String(failure)).toBe(true);
    expect(["UNAVAILABLE", "TIMEOUT"]).toContain((failure as { code: string }).code);
    expect(() => last.ids.nextIdSync()).toThrow(expect.objectContaining({ code: "CACHE_EMPTY" }));
    const drained = last.taken - before;

    const found = countRepeatedIds(loaders.map((l) => l.all()));
    const { total: counted, duplicates: dup } = found;
    const max = found.sorted.at(-1) ?? 0n;
    console.log(
      `[client failover] ${counted} ids, ${dup} duplicates, ${errors.length} errors; ${drained} ids from the cache with every server down`,
    );
    expect(dup).toBe(0);
    expect(counted).toBe(total());
    expect(max < maxId).toBe(true);
    for (const l of loaders) await l.client.close();
  }, 240_000);
});
