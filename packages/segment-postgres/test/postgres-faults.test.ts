// The PostgreSQL server broken under load: SIGKILLed or SIGSTOPped while ranges are being taken.
// Two generators stand for two servers, each with its own store; every id they hand out is counted.
// A range statement cut off by the fault is taken again (its first copy may still have moved the
// max id: a gap), so the ranges must stay disjoint through it.
import { SegmentIdGenerator } from "@leaf/segment";
import { countRepeatedIds, IdLog, type PostgresHandle, startPostgres } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { PostgresSegmentStore } from "../src/index";

/** Retries `check` until it passes; generous, since these machines are shared (not a speed bound). */
const eventually = <T>(check: () => T | Promise<T>) =>
  vi.waitFor(check, { timeout: 60_000, interval: 50 });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let db: PostgresHandle;
let database: string;
let tables = 0;

beforeAll(async () => {
  db = await startPostgres({ useEnv: false });
  database = await db.createDatabase("segment_faults");
}, 120_000);

afterAll(async () => {
  await db?.dispose();
});

interface Server {
  generator: SegmentIdGenerator;
  store: PostgresSegmentStore;
  ids: IdLog;
}

async function servers(step: number): Promise<Server[]> {
  const table = `leaf_alloc_faults_${tables++}`;
  const setup = new PostgresSegmentStore({ url: db.urlFor(database), table });
  await setup.createSchema();
  await setup.createTag({ tag: "t", step, startId: 1n });
  await setup.close();
  return Promise.all(
    [0, 1].map(async () => {
      const store = new PostgresSegmentStore({
        url: db.urlFor(database),
        table,
        connectTimeoutMs: 1_000,
        queryTimeoutMs: 1_000,
      });
      const generator = new SegmentIdGenerator({
        store,
        dynamicStep: false,
        exhaustedWaitMs: 200,
        retry: { initialMs: 20, maxMs: 200 },
      });
      await generator.start();
      return { generator, store, ids: new IdLog() };
    }),
  );
}

/** Both servers take ids as fast as they can until stopped; failures are waited out. */
function drive(all: Server[]) {
  let running = true;
  const loops = all.map(async (s) => {
    while (running) {
      try {
        for (const id of await s.generator.nextIds("t", 20)) s.ids.push(id);
      } catch {
        await sleep(10);
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
  });
  return async () => {
    running = false;
    await Promise.all(loops);
  };
}

const total = (all: Server[]) => all.reduce((n, s) => n + s.ids.count, 0);

function grown(all: Server[], before: number[], n: number): void {
  for (const [i, s] of all.entries()) expect(s.ids.count).toBeGreaterThan(before[i]! + n);
}

/** Prints every id counted, also when the test fails (its numbers are what a failure shows). */
function report(what: string, all: Server[]): number {
  const { total, duplicates } = countRepeatedIds(all.map((s) => s.ids));
  console.log(`${what}: ${total} ids, ${duplicates} handed out twice`);
  return duplicates;
}

describe("PostgresSegmentStore when the server fails under load", () => {
  it("serves no id twice when the server is SIGKILLed while ranges are taken, and resumes after its restart", async () => {
    const all = await servers(100);
    const stop = drive(all);
    let twice = -1;
    try {
      await eventually(() => expect(total(all)).toBeGreaterThan(20_000));
      await db.kill();
      // Both generators use up what they hold and fail their loads against the dead server.
      await eventually(() => {
        for (const s of all)
          expect(s.generator.snapshot("t")!.consecutiveFailures).toBeGreaterThan(0);
      });
      await db.start();
      const restarted = all.map((s) => s.ids.count);
      await eventually(() => grown(all, restarted, 5_000));
      await stop();
    } finally {
      await stop();
      twice = report("server SIGKILLed mid-take", all);
      for (const s of all) await s.generator.close();
    }
    expect(twice).toBe(0);
  }, 180_000);

  it("serves no id twice when the server is SIGSTOPped past the statement timeout while ranges are taken", async () => {
    const all = await servers(100);
    const stop = drive(all);
    let twice = -1;
    try {
      await eventually(() => expect(total(all)).toBeGreaterThan(20_000));
      db.pause();
      // Range statements already sent stay queued in the stopped server; the stores give up on
      // them after 1 s and try again, which fails too, until the server runs again.
      await eventually(() => {
        for (const s of all)
          expect(s.generator.snapshot("t")!.consecutiveFailures).toBeGreaterThan(1);
      });
      db.resume();
      const resumed = all.map((s) => s.ids.count);
      await eventually(() => grown(all, resumed, 5_000));
      await stop();
    } finally {
      db.resume();
      await stop();
      twice = report("server SIGSTOPped mid-take", all);
      for (const s of all) await s.generator.close();
    }
    expect(twice).toBe(0);
  }, 180_000);
});
