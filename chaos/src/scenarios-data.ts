// Where ranges are kept fails: the embedded store's disk fills up, two servers in different PID
// namespaces share one data folder, a MariaDB failover leaves two writable primaries. The safe
// answer is to stop serving with a clear error; a range must never be handed out twice.
import { execFileSync } from "node:child_process";
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { MysqlSegmentStore } from "@leaf/segment-mysql";
import { freePort, startMysqlReplicaPair } from "@leaf/testkit";
import type { LeafProcess, StartOutcome } from "./leaf-process";
import {
  allServing,
  codes,
  expectServed,
  isServer,
  lastWords,
  loopsOf,
  loopsOfServer,
  messagesOf,
  type Scenario,
  seconds,
  stepLasting,
  until,
} from "./scenario-kit";
import { type MaxIdSource, type ScenarioRun, sleep } from "./scenario-run";
import {
  ADMIN_TOKEN,
  adminOn,
  segmentEmbedded,
  segmentOff,
  segmentOn,
  serverConfig,
  snowflakeOff,
  snowflakeOn,
} from "./server-configs";
import { segmentDatabaseOn } from "./services";

/** A tag's max id as the server's admin API lists it (the embedded store has no other reader). */
function adminMaxIds(server: LeafProcess): MaxIdSource {
  return {
    async maxId(tag) {
      const page = await server.getJson<{ tags: Array<{ tag: string; maxId: string }> }>(
        "/api/v1/admin/tags",
        5000,
        { authorization: `Bearer ${ADMIN_TOKEN}` },
      );
      const row = page?.tags.find((t) => t.tag === tag);
      if (!row) throw new Error(`[leaf] [chaos] server ${server.label} does not list tag ${tag}`);
      return BigInt(row.maxId);
    },
  };
}

/** Failures of `server`'s loops in `phase` that are 503s, and those that are not. */
function split503(s: ScenarioRun, phase: string, server: LeafProcess) {
  const t = s.phaseTotals(phase, isServer(server));
  const others = Object.entries(t.errors).filter(([key]) => !key.startsWith("503 "));
  return { ...t, others };
}

// ---- the embedded store's disk fills up
// ------------------------------------------------------------

const TMPFS_SIZE = "256k";

export const fullDisk: Scenario = {
  name: "full-disk",
  kind: "disk",
  title: `The embedded segment store on a ${TMPFS_SIZE} tmpfs, filled up while serving; SIGKILL and restart with the disk full, then with space freed`,
  documented:
    "A range is handed out only after all its bytes are written and fsynced; on a short or failed write (ENOSPC) the store " +
    "refuses further ranges with a clear error naming the full disk and the path (503 once the loaded ranges are used up), " +
    "issues no id while it cannot write, and serves again once space is freed; a restart never hands out a range again.",
  needs: { root: true },
  plannedSeconds: 30,
  short: false,
  async run(s) {
    const name = s.unique("disk");
    const a = s.server(
      "A",
      await freePort(),
      serverConfig(name, segmentEmbedded(name), snowflakeOff(), adminOn()),
    );
    mkdirSync(a.dataDir, { recursive: true });
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${TMPFS_SIZE}`, "tmpfs", a.dataDir]);
    s.onCleanup(() => {
      execFileSync("umount", ["-l", a.dataDir]);
    });
    await s.startAll(a);
    const space = `segment:${name}`;
    s.segmentSpace(space, adminMaxIds(a), name);
    s.startLoad(loopsOf(a, { segment: { tag: name, space } }));
    await s.phase("steady", () => sleep(3000));
    const filler = join(a.dataDir, "filler");
    const full = "data folder filled up (ENOSPC)";
    const refusedAfter = await s.phase(full, async () => {
      const before = currentRefusals(s, a);
      fill(filler);
      const ms = await until(() => currentRefusals(s, a) > before, 60_000);
      await sleep(2000);
      return ms;
    });
    const filled = split503(s, full, a);
    const told = messagesOf(s, a).find((m) => /ENOSPC|disk is full/.test(m));
    s.expect(
      refusedAfter !== undefined && filled.others.length === 0,
      `with the disk full A refused with 503 only (${seconds(refusedAfter)} after it filled; ${codes(filled.errors)})`,
    );
    s.expect(
      told !== undefined,
      `the refusal names the full disk: ${told ?? messagesOf(s, a).join(" | ")}`,
    );
    const restartFull = "A SIGKILLed, restarted with the disk still full";
    const outcome = await s.phase(restartFull, async () => {
      await a.kill();
      const started = await a.tryStart();
      await sleep(3000);
      return started;
    });
    const whileFull = s.phaseTotals(restartFull, isServer(a));
    s.expect(
      whileFull.ids === 0,
      `restarted with the disk full, A issued no id (${outcome.started ? "it started" : `its start was refused: exit code ${outcome.code}, "${lastWords(outcome.output)}"`}; ${codes(whileFull.errors)})`,
    );
    const back = await s.phase("space freed", async () => {
      rmSync(filler, { force: true });
      if (!a.running) await a.start();
      return s.waitForIds(a, 30_000);
    });
    s.expect(back !== undefined, `A serves again once space is freed (${seconds(back)})`);
    const highest = s.load.idRange(loopsOfServer(a)).highest;
    await s.phase("A SIGKILLed and restarted", async () => {
      await a.kill();
      await a.start();
      await s.waitForIds(a, 30_000);
      await sleep(2000);
    });
    const lowest = s.load.idRange(loopsOfServer(a), a.incarnation).lowest;
    s.expect(
      lowest !== undefined && highest !== undefined && lowest > highest,
      `after the restart A's ids start above every id it issued before (${highest} then ${lowest})`,
    );
    return `503 ${seconds(refusedAfter)} after the disk filled (${codes(filled.errors)}); restart with the disk full ${outcome.started ? "started, no id" : "refused"}; serving ${seconds(back)} after space was freed`;
  },
};

/** Writes `path` until the file system is full. */
function fill(path: string): void {
  const fd = openSync(path, "w");
  const block = Buffer.alloc(4096, 0x2e);
  try {
    for (;;) writeSync(fd, block);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
  } finally {
    closeSync(fd);
  }
}

/** Refusals (any failure) of `server`'s loops so far. */
function currentRefusals(s: ScenarioRun, server: LeafProcess): number {
  return s.load
    .counters()
    .filter(loopsOfServer(server))
    .reduce((n, c) => n + Object.values(c.errors).reduce((m, x) => m + x, 0), 0);
}

// ---- one data folder, two PID namespaces
// -----------------------------------------------------------

export const sharedFolder: Scenario = {
  name: "shared-folder",
  kind: "disk",
  title:
    "Two servers, each pid 1 of its own PID namespace (unshare --pid --fork) on one host name, sharing one data folder (embedded store and local registry)",
  documented:
    "The lock file records the boot id and the PID namespace, and an owner that cannot be proven dead is alive: the second " +
    "server is refused at start (LOCKED, exit code 1) while the first serves; no id repeated.",
  needs: { root: true },
  plannedSeconds: 20,
  short: false,
  async run(s) {
    const name = s.unique("shared");
    const dataDir = join(s.ctx.dir, s.name, "shared-data");
    const config = serverConfig(
      name,
      segmentEmbedded(name),
      snowflakeOn("local", { localWorkerId: 3 }),
      adminOn(),
    );
    const options = { dataDir, pidNamespace: true };
    const a = s.server("A", await freePort(), config, undefined, options);
    const b = s.server("B", await freePort(), config, undefined, options);
    // C uses only the local registry's part of the folder.
    const c = s.server(
      "C",
      await freePort(),
      serverConfig(name, segmentOff(), snowflakeOn("local", { localWorkerId: 3 })),
      undefined,
      options,
    );
    await s.startAll(a);
    const spaces = { segment: `segment:${name}`, snowflake: `snowflake:${name}` };
    s.segmentSpace(spaces.segment, adminMaxIds(a), name);
    s.snowflakeSpace(spaces.snowflake, [a, b, c]);
    s.startLoad(
      loopsOf(a, {
        segment: { tag: name, space: spaces.segment },
        snowflake: { space: spaces.snowflake },
      }),
    );
    await s.phase("steady", () => sleep(3000));
    const second = "B started on A's data folder, twice; C (local registry only) once";
    const attempts = await s.phase(second, async () => {
      const tries: Array<[LeafProcess, StartOutcome]> = [];
      for (const server of [b, b, c]) {
        if (server.running) continue;
        tries.push([server, await server.tryStart()]);
        await sleep(1000);
      }
      return tries;
    });
    for (const [i, [server, outcome]] of attempts.entries()) {
      s.expect(
        !outcome.started && outcome.code === 1 && /LOCKED|WORKER_ID_IN_USE/.test(outcome.output),
        `${server.label}'s start (attempt ${i + 1}) was refused (${outcome.started ? "it STARTED" : `exit code ${outcome.code}: "${lastWords(outcome.output)}"`})`,
      );
    }
    for (const server of [b, c].filter((x) => x.running)) {
      // Refused checks failed above; its ids still count.
      s.addLoad(
        loopsOf(server, {
          ...(server === b ? { segment: { tag: name, space: spaces.segment } } : {}),
          snowflake: { space: spaces.snowflake },
        }),
      );
    }
    if (b.running || c.running) await sleep(3000);
    expectServed(s, second, isServer(a), "A");
    await s.phase("steady after", () => sleep(2000));
    return attempts
      .map(([x, o]) => `${x.label} ${o.started ? "STARTED" : `refused (exit ${o.code})`}`)
      .join(", ");
  },
};

// ---- a MariaDB failover that leaves two writable primaries
// -----------------------------------------

export const mysqlSplitBrain: Scenario = {
  name: "mysql-split-brain",
  kind: "MariaDB",
  title:
    "A MariaDB primary and its replica (real, semi-synchronous replication), two servers with the host list [primary, replica]: the primary SIGKILLed, the replica promoted, the old primary back writable, a third server started then",
  documented:
    "While the primary is down the read-only replica is refused; once promoted, ranges come from it. With two listed hosts " +
    "writable (a split brain) no range is handed out: requests fail with 503 naming the split brain once the loaded ranges " +
    "are used up, and a server started then (it begins with the old primary, whose max id is behind) issues nothing; once the old primary is made read-only ranges resume; every range is above the last one; no id repeated.",
  needs: {},
  plannedSeconds: 40,
  short: false,
  async run(s) {
    const pair = await startMysqlReplicaPair();
    s.onCleanup(() => pair.dispose());
    const { primary, replica } = pair;
    const name = s.unique("split");
    const db = await segmentDatabaseOn(
      primary,
      [{ tag: name, step: stepLasting(s.rate / 2, 1) }],
      (database) =>
        `mysql://${primary.user}@127.0.0.1:${primary.port},127.0.0.1:${replica.port}/${database}`,
    );
    s.onCleanup(() => db.close());
    await pair.waitForReplica();
    // The replica becomes the primary: the tag's max id is read there at the end.
    const promoted = new MysqlSegmentStore({
      url: replica.urlFor(db.database),
      user: replica.user,
      password: "",
    });
    s.onCleanup(() => promoted.close());
    const maxIds: MaxIdSource = {
      async maxId(tag) {
        const row = (await promoted.describeTags()).find((r) => r.tag === tag);
        if (!row) throw new Error(`[leaf] [chaos] tag ${tag} is missing on the replica`);
        return row.maxId;
      },
    };
    const config = serverConfig(name, segmentOn(db.url, { dynamicStep: false }), snowflakeOff());
    const a = s.server("A", await freePort(), config);
    const b = s.server("B", await freePort(), config);
    // C starts during the split brain: a fresh process begins with the first listed host, the old
    // primary, whose max id is behind the promoted replica's.
    const c = s.server("C", await freePort(), config);
    await s.startAll(a, b);
    const space = `segment:${name}`;
    s.segmentSpace(space, maxIds, name);
    s.startLoad([
      ...loopsOf(a, { segment: { tag: name, space } }),
      ...loopsOf(b, { segment: { tag: name, space } }),
    ]);
    await s.phase("steady", () => sleep(3000));
    await s.phase("primary SIGKILLed", async () => {
      await primary.kill();
      await sleep(4000);
    });
    const failover = await s.phase("replica promoted (STOP SLAVE, read_only OFF)", async () => {
      await pair.promoteReplica();
      return allServing(s, [a, b], 60_000);
    });
    s.expect(
      failover !== undefined,
      `both servers take ranges from the promoted replica (${seconds(failover)})`,
    );
    const splitBrain = "old primary back, writable: split brain";
    let cStarting: Promise<StartOutcome> | undefined;
    const refused = await s.phase(splitBrain, async () => {
      await primary.start();
      const ms = await until(
        () => [a, b].every((x) => messagesOf(s, x).some((m) => /split brain/.test(m))),
        60_000,
      );
      // Its start waits for its first ranges, which the split brain refuses.
      cStarting = c.tryStart();
      await sleep(4000);
      return ms;
    });
    s.expect(
      !(await c.ready()),
      "C, started during the split brain, did not become ready: no range, so no open port and no id",
    );
    for (const server of [a, b]) {
      const t = split503(s, splitBrain, server);
      const told = messagesOf(s, server).find((m) => /split brain/.test(m));
      s.expect(
        told !== undefined && t.others.length === 0,
        `${server.label} refused with 503 naming the split brain, nothing else (${codes(t.errors)}): ${told ?? "(no such message)"}`,
      );
    }
    const healed = await s.phase("old primary made read-only (operator)", async () => {
      await pair.query(primary, "SET GLOBAL read_only = ON");
      const started = await cStarting;
      if (started?.started) s.addLoad(loopsOf(c, { segment: { tag: name, space } }));
      s.expect(
        started?.started === true,
        `C became ready once only one host was writable (${started?.started ? `${seconds(started.ms)} after its start began` : lastWords(started?.output ?? "")})`,
      );
      return allServing(s, [a, b, c], 60_000);
    });
    s.expect(
      healed !== undefined,
      `every server serves again once only one host is writable (${seconds(healed)})`,
    );
    await s.phase("steady after", () => sleep(2000));
    expectServed(s, "steady after", () => true, "every server");
    return `split brain refused ${seconds(refused)} after the old primary came back; serving ${seconds(healed)} after it was made read-only`;
  },
};
