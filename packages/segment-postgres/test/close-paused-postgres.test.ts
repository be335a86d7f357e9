// close() while the PostgreSQL server is SIGSTOPped with statements in flight and a connection being
// opened (the check @leaf/segment-mysql's close-paused test makes of MariaDB, whose pool end waited
// for the server): pg ends a statement at queryTimeoutMs and a connection at connectTimeoutMs, so
// the store's close ends while the server is still stopped, and a store opened after it hands out
// no id twice.
import { countDuplicates, type PostgresHandle, startPostgres } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresSegmentStore } from "../src/index";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How long the server stays stopped while close() runs: far past the store's timeouts (1-2 s). */
const PAUSED_MS = 30_000;

let db: PostgresHandle;
let database: string;

beforeAll(async () => {
  db = await startPostgres({ useEnv: false });
  database = await db.createDatabase("close_paused");
}, 120_000);

afterAll(async () => {
  if (db?.running) db.resume();
  await db?.dispose();
});

const storeOn = () =>
  new PostgresSegmentStore({
    url: db.urlFor(database),
    connectTimeoutMs: 2_000,
    queryTimeoutMs: 1_000,
  });

/** Every id of `ranges`. */
function idsOf(ranges: { start: bigint; end: bigint }[]): bigint[] {
  const ids: bigint[] = [];
  for (const r of ranges) for (let id = r.start; id < r.end; id++) ids.push(id);
  return ids;
}

describe("PostgresSegmentStore.close() while PostgreSQL is SIGSTOPped", () => {
  it("ends while the server is stopped with a range and a give-back in flight; a store opened after takes no id twice", async () => {
    const first = storeOn();
    await first.createSchema();
    await first.createTag({ tag: "t", step: 100 });
    const handedOut = [await first.takeRange("t"), await first.takeRange("t")];
    const last = await first.takeRange("t");
    db.pause();
    // The range on the pooled connection, the give-back on one being opened: neither answered.
    const inFlight = [
      first.takeRange("t").then(
        () => "a range",
        (e: { code?: string }) => e.code,
      ),
      first.giveBack("t", last.start, last.end).then(
        (given) => (given ? "given back" : "not given back"),
        (e: { code?: string }) => e.code,
      ),
    ];
    await sleep(300);
    let closed = false;
    const closing = first.close().finally(() => {
      closed = true;
    });
    await Promise.race([closing, sleep(PAUSED_MS)]);
    const closedWhilePaused = closed;
    db.resume();
    await closing;
    expect(closedWhilePaused).toBe(true);
    const outcomes = await Promise.all(inFlight);
    expect(outcomes[0]).toBe("CLOSED");
    // The give-back was refused as closed, or ran once the server came back (it was sent before
    // the close): its ids count as handed out unless they were given back.
    expect(["CLOSED", "UNAVAILABLE", "given back"]).toContain(outcomes[1]);
    if (outcomes[1] !== "given back") handedOut.push(last);
    const second = storeOn();
    try {
      const later = [];
      for (let i = 0; i < 5; i++) later.push(await second.takeRange("t"));
      const count = countDuplicates([idsOf(handedOut), idsOf(later)]);
      expect({ total: count.total, duplicates: count.duplicates }).toEqual({
        total: 100 * (handedOut.length + later.length),
        duplicates: 0,
      });
    } finally {
      await second.close();
    }
  }, 120_000);
});
