// Attacks on the residue set (ResidueSegmentStore, formResidueSet) over real MariaDB databases,
// each database behind its own TcpProxy; every id handed out is counted. Kept as regression tests:
// 1. two runs at once (2 to 3: [a, b, c] and [a, b, d]); the loser, run again as its error says,
//    was accepted (c and d both remainder 2 of 3): refused now, the epoch's records name its members;
// 2. a run [a, b, d] cut short after d joined, [a, b, c] run instead, then [a, b, d] run "to finish":
//    was accepted (c and d both 2 of 3): refused now, as 1;
// 3. a database restored from a backup of an older epoch (0, remainder 0 of 2) while the set is at
//    epoch 1 with 3 members, the others cut off when a server starts: was served; refused now by
//    its own record (delta 2, 3 databases listed: stale-epoch);
// 4. remainders swapped by hand between two databases (versions bumped): was served; refused now
//    (a remainder is bound to the record's place in its epoch's member list);
// 5. 2 to 3 under load through a fence write that times out but happens, a cut mid-raise and reruns:
//    found nothing, kept as a regression test.
import { isLeafError } from "@leaf/core";
import { formResidueSet, ResidueSegmentStore, SegmentIdGenerator } from "@leaf/segment";
import {
  countDuplicates,
  countRepeatedIds,
  IdLog,
  type MysqlHandle,
  startMysql,
  TcpProxy,
} from "@leaf/testkit";
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MysqlSegmentStore } from "../src/index";

let server: MysqlHandle;
const proxies: TcpProxy[] = [];

beforeAll(async () => {
  server = await startMysql({ useEnv: false });
}, 60_000);

afterAll(async () => {
  for (const p of proxies) await p.close();
  await server?.dispose();
});

/** One database of the server, reached through a proxy of its own (cut it on its own). */
interface Database {
  name: string;
  database: string;
  proxy: TcpProxy;
}

async function database(name: string): Promise<Database> {
  const database = await server.createDatabase("attack");
  const proxy = await TcpProxy.start({ targetPort: server.port });
  proxies.push(proxy);
  const d = { name, database, proxy };
  const store = storeOf(d);
  await store.createSchema();
  await store.close();
  return d;
}

const storeOf = (d: Database, port = d.proxy.port) =>
  new MysqlSegmentStore({
    hosts: [{ host: "127.0.0.1", port }],
    user: server.user,
    database: d.database,
    table: "leaf_alloc",
    connectTimeoutMs: 1_000,
    queryTimeoutMs: 2_000,
  });

async function query(d: Database, sql: string, values: unknown[] = []): Promise<unknown> {
  const conn = await mysql.createConnection(server.connectionOptions(d.database));
  try {
    const [rows] = await conn.query(sql, values);
    return rows;
  } finally {
    await conn.end();
  }
}

async function form(list: Database[]) {
  const stores = list.map((d) => storeOf(d));
  try {
    return await formResidueSet(stores, { names: list.map((d) => d.name) });
  } finally {
    for (const s of stores) await s.close();
  }
}

const residueStore = (list: Database[]) =>
  new ResidueSegmentStore({
    members: list.map((d) => storeOf(d)),
    names: list.map((d) => d.name),
    hedgeMs: 2_000,
    retry: { initialMs: 50, maxMs: 500 },
  });

/** Ids drawn one call at a time from a generator over `list` (the first listed serves the tag). */
async function draw(list: Database[], tag: string, count: number): Promise<bigint[]> {
  const generator = new SegmentIdGenerator({ store: residueStore(list) });
  await generator.start();
  const ids: bigint[] = [];
  try {
    while (ids.length < count) ids.push(...(await generator.nextIds(tag, 100)));
  } finally {
    await generator.close();
  }
  return ids;
}

const residues = (list: Database[]) =>
  Promise.all(
    list.map((d) =>
      query(d, "SELECT delta, remainder, epoch, state FROM leaf_alloc_residue").catch(() => "none"),
    ),
  );

describe("attack: formResidueSet", () => {
  it("two runs at once (2 to 3, each adding another database); the loser run again as its error says", async () => {
    const [a, b, c, d] = [
      await database("a"),
      await database("b"),
      await database("c"),
      await database("d"),
    ];
    await form([a, b]);
    const admin = residueStore([a, b]);
    await admin.createTag({ tag: "t", step: 1000, startId: 1n });
    await admin.close();
    const before = [...(await draw([a, b], "t", 5_000)), ...(await draw([b, a], "t", 5_000))];

    // Two operators add a third database each, at the same time.
    const runs = await Promise.allSettled([form([a, b, c]), form([a, b, d])]);
    const outcome = runs.map((r) =>
      r.status === "fulfilled"
        ? "ok"
        : `${(r.reason as { details?: { reason?: string } }).details?.reason}: ${(r.reason as Error).message}`,
    );
    console.log(`two runs at once: ${JSON.stringify(outcome)}`);
    const loser = runs[0]!.status === "rejected" ? [a, b, c] : [a, b, d];
    const winner = loser[2] === c ? [a, b, d] : [a, b, c];
    console.log(`residues after the race: ${JSON.stringify(await residues([a, b, c, d]))}`);

    // The winner's servers draw from its new database.
    const fromWinner = await draw([winner[2]!, a, b], "t", 20_000);
    // The loser's operator does what the error says: runs it again once the other one is done.
    let again: string;
    try {
      const report = await form(loser);
      again = `accepted: epoch ${report.epoch}, startsAt ${report.startsAt.get("t")}`;
    } catch (error) {
      again = `refused: ${isLeafError(error) ? `${error.code} ${error.details.reason}` : String(error)}`;
      console.log(`the loser run again: ${(error as Error).message}`);
    }
    console.log(`the loser run again: ${again}`);
    console.log(`residues now: ${JSON.stringify(await residues([a, b, c, d]))}`);
    // Servers of each operator draw from the database each added.
    const fromLoser = await draw([loser[2]!, a, b], "t", 20_000);
    const fromWinner2 = await draw([winner[2]!, a, b], "t", 20_000);
    const count = countDuplicates([before, fromWinner, fromLoser, fromWinner2]);
    console.log(
      `ids: ${count.total}, twice: ${count.duplicates}, e.g. ${count.examples.join(", ")}`,
    );
    expect(again).toBe("refused: INVALID_CONFIG incomplete-set");
    expect(count.duplicates).toBe(0);
  }, 120_000);

  it("a run cut short (a database cut off after the new one joined), another database added instead, then the first run finished as the README says", async () => {
    const [a, b, c, d] = [
      await database("a"),
      await database("b"),
      await database("c"),
      await database("d"),
    ];
    await form([a, b]);
    const admin = residueStore([a, b]);
    await admin.createTag({ tag: "t", step: 1000, startId: 1n });
    await admin.close();
    const before = [...(await draw([a, b], "t", 5_000)), ...(await draw([b, a], "t", 5_000))];

    // Operator 1 adds d; a is cut off right after d joined, so the fence of a fails.
    const stores = [a, b, d].map((x) => storeOf(x));
    let first: string;
    try {
      await formResidueSet(stores, {
        names: ["a", "b", "d"],
        onProgress: (message) => {
          if (message.startsWith("d joins")) a.proxy.cutOff();
        },
      });
      first = "completed";
    } catch (error) {
      first = `failed: ${isLeafError(error) ? error.code : String(error)}`;
    } finally {
      for (const s of stores) await s.close();
      a.proxy.heal();
    }
    console.log(`run [a, b, d] with a cut: ${first}`);
    console.log(`residues: ${JSON.stringify(await residues([a, b, c, d]))}`);
    // Operator 2 adds c instead (d's server looked broken), and its servers serve.
    await form([a, b, c]);
    const fromC = await draw([c, a, b], "t", 20_000);
    // Later, the README's "run it again with the same members, in the same order, to finish".
    let again: string;
    try {
      const report = await form([a, b, d]);
      again = `accepted: epoch ${report.epoch}, startsAt ${report.startsAt.get("t")}`;
    } catch (error) {
      again = `refused: ${isLeafError(error) ? `${error.code} ${error.details.reason}` : String(error)}`;
    }
    console.log(`run [a, b, d] again: ${again}`);
    console.log(`residues now: ${JSON.stringify(await residues([a, b, c, d]))}`);
    const fromD = await draw([d, a, b], "t", 20_000);
    const count = countDuplicates([before, fromC, fromD]);
    console.log(
      `ids: ${count.total}, twice: ${count.duplicates}, e.g. ${count.examples.join(", ")}`,
    );
    expect(again).toBe("refused: INVALID_CONFIG incomplete-set");
    expect(count.duplicates).toBe(0);
  }, 120_000);

  it("a database restored from a backup of an older epoch, with the members of the newer epoch cut off when a server starts", async () => {
    const [a, b, c] = [await database("a"), await database("b"), await database("c")];
    await form([a, b]);
    const admin = residueStore([a, b]);
    await admin.createTag({ tag: "t", step: 1000, startId: 1n });
    await admin.close();
    const early = await draw([a, b], "t", 5_000);
    // The backup of a: its tag row and its residue record.
    const backup = {
      alloc: (await query(a, "SELECT max_id FROM leaf_alloc WHERE biz_tag = 't'")) as {
        max_id: number;
      }[],
      residue: (await query(a, "SELECT * FROM leaf_alloc_residue")) as Record<string, unknown>[],
    };
    const late = await draw([a, b], "t", 5_000);
    await form([a, b, c]);
    const newLayout = await draw([a, b, c], "t", 5_000);
    // a restored from the backup (epoch 0, its max id back).
    const r = backup.residue[0]!;
    await query(a, "UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = 't'", [
      backup.alloc[0]!.max_id,
    ]);
    await query(
      a,
      "UPDATE leaf_alloc_residue SET set_id = ?, member_id = ?, epoch = ?, delta = ?, remainder = ?, state = ?, version = ?, members = ? WHERE id = 1",
      [r.set_id, r.member_id, r.epoch, r.delta, r.remainder, r.state, r.version, r.members],
    );
    // A server starts while b and c are cut off from it.
    b.proxy.cutOff();
    c.proxy.cutOff();
    let restored: bigint[] = [];
    let outcome: string;
    try {
      restored = await draw([a, b, c], "t", 5_000);
      outcome = "served";
    } catch (error) {
      outcome = `refused: ${isLeafError(error) ? `${error.code} ${error.details.reason}` : String(error)}`;
    } finally {
      b.proxy.heal();
      c.proxy.heal();
    }
    const count = countDuplicates([early, late, newLayout, restored]);
    console.log(
      `restored backup, newer members cut: ${outcome}; ids ${count.total}, twice ${count.duplicates}, e.g. ${count.examples.join(", ")}`,
    );
    expect(outcome).toBe("refused: INVALID_CONFIG stale-epoch");
    expect(count.duplicates).toBe(0);
  }, 120_000);

  it("remainders swapped by hand between two databases (each record still well-formed)", async () => {
    const [a, b] = [await database("a"), await database("b")];
    await form([a, b]);
    const admin = residueStore([a, b]);
    await admin.createTag({ tag: "t", step: 1000, startId: 1n });
    await admin.close();
    const fromB = await draw([b, a], "t", 20_000); // b far ahead
    const fromA = await draw([a, b], "t", 2_000);
    await query(a, "UPDATE leaf_alloc_residue SET remainder = 1, version = version + 1");
    await query(b, "UPDATE leaf_alloc_residue SET remainder = 0, version = version + 1");
    let after: bigint[] = [];
    let outcome: string;
    try {
      after = await draw([a, b], "t", 10_000);
      outcome = "served";
    } catch (error) {
      outcome = `refused: ${isLeafError(error) ? `${error.code} ${error.details.reason}` : String(error)}`;
    }
    const count = countDuplicates([fromB, fromA, after]);
    console.log(
      `swapped remainders: ${outcome}; ids ${count.total}, twice ${count.duplicates}, e.g. ${count.examples.join(", ")}`,
    );
    expect(outcome).toBe("refused: CORRUPT_DATA bad-residue");
    expect(count.duplicates).toBe(0);
  }, 120_000);

  it("2 to 3 under load through a fence write that times out but happens (row locked in another session), a cut mid-raise, and reruns", async () => {
    const [a, b, c] = [await database("a"), await database("b"), await database("c")];
    await form([a, b]);
    const admin = residueStore([a, b]);
    await admin.createTag({ tag: "t", step: 500, startId: 1n });
    await admin.createTag({ tag: "u", step: 200, startId: 1n });
    await admin.close();
    // Servers drawing all along: two over [b, a], one over [a, b], later one over [c, a, b].
    const ids: Record<string, IdLog[]> = { t: [], u: [] };
    const errors: string[] = [];
    let running = true;
    const loops: Promise<void>[] = [];
    const serve = async (list: Database[]) => {
      const generator = new SegmentIdGenerator({ store: residueStore(list) });
      await generator.start();
      const mine: Record<string, IdLog> = { t: new IdLog(), u: new IdLog() };
      ids.t!.push(mine.t!);
      ids.u!.push(mine.u!);
      loops.push(
        (async () => {
          let i = 0;
          while (running) {
            const tag = i++ % 3 === 0 ? "u" : "t";
            try {
              for (const id of await generator.nextIds(tag, 20)) mine[tag]!.push(id);
              await new Promise((r) => setTimeout(r, 1));
            } catch (error) {
              errors.push(isLeafError(error) ? error.code : String(error));
              await new Promise((r) => setTimeout(r, 20));
            }
          }
          await generator.close();
        })(),
      );
    };
    await serve([b, a]);
    await serve([b, a]);
    await serve([a, b]);
    await new Promise((r) => setTimeout(r, 1_000));

    // 1. A session locks a's residue row: the fence of a waits, times out, then happens.
    const locker = await mysql.createConnection(server.connectionOptions(a.database));
    await locker.query("BEGIN");
    await locker.query("SELECT * FROM leaf_alloc_residue WHERE id = 1 FOR UPDATE");
    const outcomes: string[] = [];
    const attempt = async (list: Database[], onProgress?: (m: string) => void) => {
      const stores = list.map((x) => storeOf(x));
      try {
        const r = await formResidueSet(stores, { names: list.map((x) => x.name), onProgress });
        outcomes.push(`ok epoch ${r.epoch} R(t) ${r.startsAt.get("t")}`);
      } catch (error) {
        outcomes.push(
          `failed ${isLeafError(error) ? `${error.code} ${error.details.reason ?? ""}` : String(error)}`,
        );
      } finally {
        for (const s of stores) await s.close();
      }
    };
    await attempt([a, b, c]);
    await new Promise((r) => setTimeout(r, 500));
    await locker.query("COMMIT");
    await locker.end();
    await new Promise((r) => setTimeout(r, 500));
    outcomes.push(`residues ${JSON.stringify(await residues([a, b, c]))}`);
    // 2. Run again; b is cut off once the raise has begun.
    await attempt([a, b, c], (m) => {
      if (m.startsWith("raised") || m.startsWith("created")) b.proxy.cutOff();
    });
    b.proxy.heal();
    outcomes.push(`residues ${JSON.stringify(await residues([a, b, c]))}`);
    await new Promise((r) => setTimeout(r, 1_000));
    // 3. Finish.
    await attempt([a, b, c]);
    await serve([c, a, b]);
    await new Promise((r) => setTimeout(r, 2_000));
    running = false;
    await Promise.all(loops);
    const count = countRepeatedIds(ids.t!);
    const countU = countRepeatedIds(ids.u!);
    console.log(
      `under load: ${outcomes.join(" | ")}; t: ids ${count.total}, twice ${count.duplicates} e.g. ${count.examples.join(", ")}; u: ids ${countU.total}, twice ${countU.duplicates}; errors ${errors.length} (${[...new Set(errors)].join(",")})`,
    );
    expect(count.duplicates + countU.duplicates).toBe(0);
  }, 180_000);
});
