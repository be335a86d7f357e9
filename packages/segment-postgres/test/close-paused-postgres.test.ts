// close() while the PostgreSQL server is SIGSTOPped with statements in flight and a connection being
// opened (`segmentStoreClosePausedConformance` of @leaf/conformance, as segment-mysql runs it
// against MariaDB, whose pool end waited for the server): pg ends a statement at queryTimeoutMs
// and a connection at connectTimeoutMs, so the store's close ends while the server is still
// stopped, and a store opened after it hands out no id twice.
import { segmentStoreClosePausedConformance } from "@leaf/conformance/segment-store";
import { type PostgresHandle, settlesWhilePaused, startPostgres } from "@leaf/testkit";
import { afterAll, beforeAll, describe, test } from "vitest";
import { PostgresSegmentStore } from "../src/index";

/** How long the server stays stopped while close() runs: far past the store's timeouts (1-2 s). */
const PAUSED_MS = 30_000;

let db: PostgresHandle;
let database: string;

beforeAll(async () => {
  db = await startPostgres({ useEnv: false });
  database = await db.createDatabase("close_paused");
  const store = storeOn();
  await store.createSchema();
  await store.close();
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

describe("PostgresSegmentStore.close() while PostgreSQL is SIGSTOPped", () => {
  // The range on the pooled connection, the give-back on one being opened: the give-back is
  // refused as closed, or runs once the server comes back (it was sent before the close).
  segmentStoreClosePausedConformance(test, {
    name: "segment-postgres",
    create: storeOn,
    pause: () => db.pause(),
    settleWhilePaused: (promise) => settlesWhilePaused(db, promise, PAUSED_MS),
  });
});
