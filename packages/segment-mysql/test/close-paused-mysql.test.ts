// close() while the MariaDB server is SIGSTOPped with statements in flight: mysql2's pool end waits
// for each connection's last statement, so a store whose server does not answer used to hold its
// close (and a server's stop) until the server was resumed. Now close() ends while the server is
// still stopped, and nothing it did matters for uniqueness: stores opened after it, and generators
// on a residue set, hand out no id twice. The single store's case is the conformance suite's
// (`segmentStoreClosePausedConformance`), which segment-postgres runs too.
import { segmentStoreClosePausedConformance } from "@leaf/conformance/segment-store";
import { formResidueSet, ResidueSegmentStore, SegmentIdGenerator } from "@leaf/segment";
import { countDuplicates, type MysqlHandle, settlesWhilePaused, startMysql } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it, test, vi } from "vitest";
import { MysqlSegmentStore } from "../src/index";

/** Retries `check` until it passes; generous, since these machines are shared (not a speed bound). */
const eventually = <T>(check: () => T | Promise<T>, timeout = 30_000) =>
  vi.waitFor(check, { timeout, interval: 50 });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * How long a test keeps the server stopped while close() runs: far past the stores' query
 * timeout (1 s), so that a close that waits for the server is told from one that does not.
 */
const PAUSED_MS = 30_000;

const servers: MysqlHandle[] = [];

beforeAll(async () => {
  for (let i = 0; i < 2; i++) servers.push(await startMysql({ useEnv: false }));
});

afterAll(async () => {
  for (const s of servers) {
    if (s.running) s.resume();
    await s.dispose();
  }
});

/**
 * A store with a short query timeout and a connect timeout past PAUSED_MS: a connection opened to
 * the stopped server waits for its greeting all along (mysql2's pool end gives up on a connection
 * whose connect fails, which would end the close of the store without the fix as well).
 */
const storeOn = (server: MysqlHandle, database: string) =>
  new MysqlSegmentStore({
    url: server.urlFor(database),
    connectTimeoutMs: 2 * PAUSED_MS,
    queryTimeoutMs: 1_000,
  });

describe("MysqlSegmentStore.close() while MariaDB is SIGSTOPped", () => {
  // A range and a give-back of the last range's ids, each on a connection of its own, unanswered.
  // Neither answered (the give-back's first statement is the no-op before its write): both are
  // refused as closed, and whatever the server runs of them once resumed changes nothing.
  describe("a store with a range and a give-back in flight", () => {
    let database = "";
    beforeAll(async () => {
      database = await servers[0]!.createDatabase("close_paused");
      const store = storeOn(servers[0]!, database);
      await store.createSchema();
      await store.close();
    });
    segmentStoreClosePausedConformance(test, {
      name: "segment-mysql",
      create: () => storeOn(servers[0]!, database),
      pause: () => servers[0]!.pause(),
      settleWhilePaused: (promise) => settlesWhilePaused(servers[0]!, promise, PAUSED_MS),
      giveBackOutcomes: ["CLOSED"],
    });
  });

  it("lets a generator on a residue set close while one of its two databases is stopped under load, with no id twice", async () => {
    const databases = await Promise.all(servers.map((s) => s.createDatabase("close_residue")));
    const open = () => servers.map((s, i) => storeOn(s, databases[i]!));
    const forming = open();
    for (const store of forming) await store.createSchema();
    await formResidueSet(forming, { names: ["a", "b"] });
    for (const store of forming) await store.close();
    const generatorOf = () => {
      const store = new ResidueSegmentStore({
        members: open(),
        names: ["a", "b"],
        hedgeMs: 200,
        retry: { initialMs: 50, maxMs: 500 },
      });
      const generator = new SegmentIdGenerator({
        store,
        dynamicStep: false,
        refreshIntervalMs: 300,
        retry: { initialMs: 20, maxMs: 200 },
      });
      return { store, generator };
    };
    const first = generatorOf();
    await first.generator.start();
    await first.generator.createTag({ tag: "t", step: 200 });
    const ids: bigint[] = [];
    let running = true;
    const errors: unknown[] = [];
    const load = (async () => {
      while (running) {
        try {
          ids.push(...(await first.generator.nextIds("t", 10)));
        } catch (error) {
          errors.push(error);
          await sleep(20);
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    const paused = servers[0]!;
    try {
      await eventually(() => expect(ids.length).toBeGreaterThan(2_000));
      paused.pause();
      // Ids come from b's class, while calls to a go unanswered.
      const from = ids.length;
      await eventually(() =>
        expect(ids.slice(from).filter((id) => id % 2n === 1n).length).toBeGreaterThan(2_000),
      );
      await eventually(() => expect(first.store.status()[0]!.state).toBe("stalled"));
      running = false;
      await load;
      const { whilePaused: closedWhilePaused } = await settlesWhilePaused(
        paused,
        first.generator.close(),
        PAUSED_MS,
      );
      expect(closedWhilePaused).toBe(true);
    } finally {
      running = false;
      await load;
      paused.resume(); // SIGCONT: nothing when it runs
      await first.generator.close();
    }
    // Both databases back: a generator on the set draws from a again (listed first); nothing twice.
    const later: bigint[] = [];
    const next = generatorOf();
    await next.generator.start();
    try {
      for (let i = 0; i < 400; i++) later.push(...(await next.generator.nextIds("t", 10)));
    } finally {
      await next.generator.close();
    }
    expect(later.every((id) => id % 2n === 0n)).toBe(true);
    const count = countDuplicates([ids, later]);
    console.log(
      `residue close while paused: ${count.total} ids, ${count.duplicates} twice, ${errors.length} failed calls`,
    );
    expect(count.duplicates).toBe(0);
  }, 180_000);
});
