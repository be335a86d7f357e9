// The server on a residue set (segment.store=residue), as an operator runs it: the set formed by
// `leaf-server --form-residue-set`, two server processes taking ids under load while one database
// of two is killed, SIGSTOPped and cut off (TcpProxy), a mixed MariaDB + PostgreSQL set grown from
// two databases to three by the command under load. Every id answered is counted.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  countDuplicates,
  freePort,
  type LeafServerProcess,
  type MysqlHandle,
  type PostgresHandle,
  runNode,
  startMysql,
  startPostgres,
  stopAll,
  TcpProxy,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { storeBackend } from "../src/backends/index";
import { loadConfig } from "../src/index";
import { CLI } from "./cli-process";
import { Load, serverProcess, until } from "./fault-servers";

const TOKEN = "residue-admin-token-0123456789";

/** A private MariaDB reached through a proxy that can cut it off. */
interface Db {
  name: string;
  db: MysqlHandle;
  proxy: TcpProxy;
}

const dbs: Db[] = [];
let pg: PostgresHandle;
const dirs: string[] = [];

beforeAll(async () => {
  for (const name of ["a", "b"]) {
    const db = await startMysql({ useEnv: false });
    dbs.push({ name, db, proxy: await TcpProxy.start({ targetPort: db.port }) });
  }
  pg = await startPostgres({ useEnv: false });
}, 180_000);

afterAll(async () => {
  await stopAll();
  for (const d of dbs) {
    await d.proxy.close();
    await d.db.dispose();
  }
  await pg?.dispose();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "leaf-server-residue-"));
  dirs.push(dir);
  return dir;
}

/** A database on MariaDB `d`, its URL through the proxy (root without a password: `root:@`). */
async function mysqlMember(d: Db): Promise<string> {
  const database = await d.db.createDatabase("residue");
  return `mysql://${d.db.user}:@127.0.0.1:${d.proxy.port}/${database}`;
}

async function postgresMember(): Promise<string> {
  const database = await pg.createDatabase("residue");
  return `postgres://${pg.user}:@127.0.0.1:${pg.port}/${database}`;
}

/**
 * A server configuration on the set `members` (segment.store=residue by its address key), its
 * tags (and so its databases' residues) read every `refreshMs`; `dynamicStep` false keeps every
 * range at the tag's step.
 */
function configOf(
  members: string[],
  refreshMs = 60_000,
  dynamicStep = true,
): Record<string, unknown> {
  return {
    server: { host: "127.0.0.1", port: 0, adminToken: TOKEN },
    segment: {
      residue: { members, createTable: true, hedgeMs: 300 },
      refreshIntervalMs: refreshMs,
      dynamicStep,
    },
    snowflake: { enabled: false },
  };
}

/** `leaf-server --form-residue-set --config FILE`: its exit code and output. */
async function formSet(members: string[]) {
  const dir = tempDir();
  const file = join(dir, "leaf.json");
  writeFileSync(file, JSON.stringify(configOf(members)));
  return runNode(CLI, ["--form-residue-set", "--config", file], { cwd: dir, timeoutMs: 120_000 });
}

async function createTag(port: number, tag: string, step: number): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/admin/tags`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ tag, step }),
  });
  expect(res.status, await res.text()).toBe(201);
}

async function startServer(
  dir: string,
  label: string,
  members: string[],
  refreshMs?: number,
  dynamicStep?: boolean,
) {
  const server = serverProcess(
    label,
    dir,
    await freePort(),
    configOf(members, refreshMs, dynamicStep),
  );
  await server.start();
  return server;
}

/** Every id the loads collected, as decimal strings. */
const idsOf = (loads: Load[]) => loads.map((l) => l.batches.flat());

/** Ids answered by `loads` since `from` (counts of batches per load) of residue class `r` of `n`. */
function classSince(loads: Load[], from: number[], r: number, n: number): number {
  let count = 0;
  loads.forEach((l, i) => {
    for (const batch of l.batches.slice(from[i])) {
      for (const id of batch) if (BigInt(id) % BigInt(n) === BigInt(r)) count++;
    }
  });
  return count;
}

/** Each server's residue members as its monitor lists them, and what the loads were refused. */
async function seen(servers: LeafServerProcess[], loads: Load[]): Promise<string> {
  const parts: string[] = [];
  for (const s of servers) {
    const monitor = await s
      .getJson<{ segment?: { members?: unknown } }>("/api/v1/monitor", 5_000)
      .catch((error: Error) => ({ error: error.message }));
    parts.push(
      `${s.label}: ${JSON.stringify(monitor && "segment" in monitor ? monitor.segment?.members : monitor)}`,
    );
  }
  const refusals = loads.map((l) => JSON.stringify(Object.fromEntries(l.refusals)));
  return `members ${parts.join("; ")}; refusals ${refusals.join(", ")}`;
}

/** The lines of `name` in a server's /metrics. */
async function metric(server: LeafServerProcess, name: string): Promise<string[]> {
  const text = (await server.getText("/metrics", 5_000)) ?? "";
  return text.split("\n").filter((line) => line.startsWith(`${name}{`));
}

describe("segment.store=residue: the configuration", () => {
  it("reads the databases from a list or one string, each checked by its own kind, with credentials from the URLs or per database", () => {
    const members =
      "jdbc:mysql://db1:3306,db2:3306/leaf?useSSL=false, postgres://leaf@pg1:5432,pg2:5432/ids";
    const config = loadConfig({
      env: {
        LEAF_SEGMENT_RESIDUE_MEMBERS: members,
        LEAF_SEGMENT_RESIDUE_USERNAMES: "app,",
        LEAF_SEGMENT_RESIDUE_PASSWORDS: '["s3cret,1", ""]',
        LEAF_SNOWFLAKE_ENABLED: "false",
      },
    });
    expect(config.segment?.store).toBe("residue");
    expect(config.server.host).toBe("0.0.0.0");
    const backend = config.segment!.backend as unknown as {
      members: { kind: string; user: string; password: string }[];
      hedgeMs: number;
    };
    expect(backend.members.map((m) => [m.kind, m.user, m.password])).toEqual([
      ["mysql", "app", "s3cret,1"],
      ["postgres", "leaf", ""],
    ]);
    expect(backend.hedgeMs).toBe(1_000);
    // Shown without a secret: each database's kind and address.
    const two = loadConfig({
      env: {
        LEAF_SEGMENT_RESIDUE_MEMBERS: "mysql://u:pw@h:3306/a mysql://u:pw@h:3307/b",
        LEAF_SNOWFLAKE_ENABLED: "false",
      },
    }).segment!;
    expect(storeBackend(two.store).describe(two.backend)).toEqual({
      kind: "residue",
      mode: "",
      target: "mysql h:3306/a.leaf_alloc, mysql h:3307/b.leaf_alloc",
      shared: true,
    });
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig({ env: { LEAF_SNOWFLAKE_ENABLED: "false", ...env } });
        return "";
      } catch (error) {
        return (error as Error).message;
      }
    };
    expect(
      problems({ LEAF_SEGMENT_RESIDUE_MEMBERS: "mysql://u:p@h/a, postgres://u@h/b" }),
    ).toContain(
      "missing segment.residue.passwords / LEAF_SEGMENT_RESIDUE_PASSWORDS for database 2: a database is configured, so its password is needed",
    );
    expect(
      problems({
        LEAF_SEGMENT_RESIDUE_MEMBERS: "mysql://u:p@h/a, mysql://u:p@h/b",
        LEAF_SEGMENT_RESIDUE_PASSWORDS: "x",
      }),
    ).toContain("1 entries for the 2 databases");
    expect(
      problems({ LEAF_SEGMENT_RESIDUE_MEMBERS: "mysql://u:p@h/a, mysql://v:q@h:3306/a" }),
    ).toContain("it lists h:3306/a.leaf_alloc twice");
    expect(problems({ LEAF_SEGMENT_RESIDUE_MEMBERS: "mysql://u:p@h/a, redis://h:6379" })).toContain(
      "expected 1 to 64 database URLs",
    );
    expect(problems({ LEAF_SEGMENT_STORE: "residue" })).toContain(
      "missing segment.residue.members",
    );
  });
});

describe("the server on a residue set of two MariaDB databases", () => {
  it("forms the set by the command; two servers keep answering through a kill, a pause and a cut of either database, no id twice", async () => {
    const members = [await mysqlMember(dbs[0]!), await mysqlMember(dbs[1]!)];
    const formed = await formSet(members);
    expect(formed.code, formed.stderr).toBe(0);
    expect(formed.stdout).toMatch(/Formed the residue set [0-9a-f]{32}, epoch 0:/);
    expect(formed.stdout).toContain("ids with id % 2 = 1");
    // Run again as listed: nothing to do.
    const again = await formSet(members);
    expect(again.stdout).toContain("is formed as listed (epoch 0): nothing to do");

    const dir = tempDir();
    // Tags read every second: a database back is seen answering within a second or so. Every
    // range stays at the tag's step: with dynamic steps the ranges doubled on each take, and on a
    // loaded machine (the CI's four test lanes) the servers held ranges of hundreds of thousands of
    // ids ahead, so each fault waited for them to drain (3 million ids and 206 s in all, against
    // 360,000 ids and 24 s with fixed steps, both under three busy loops on this 2-core machine).
    const servers = [
      await startServer(dir, "one", members, 1_000, false),
      await startServer(dir, "two", members, 1_000, false),
    ];
    // Ranges of 5,000: each fault below waits for one range's worth of ids from the other database.
    await createTag(servers[0]!.port, "t", 5_000);
    const loads = servers.map((s) => new Load(s.port, "/api/segment/get/t?count=20", 2, 4));
    const report: string[] = [];
    try {
      // Warm: both servers hold ranges; no request may fail from here on.
      await until("5,000 ids", () => loads.every((l) => l.ids > 5_000));
      const refusedWarm = loads.map((l) => l.refused);
      const faults: [string, (d: Db) => unknown, (d: Db) => unknown][] = [
        ["killed", (d) => d.db.kill(), (d) => d.db.start()],
        ["SIGSTOPped", (d) => d.db.pause(), (d) => d.db.resume()],
        ["cut off", (d) => d.proxy.cutOff(), (d) => d.proxy.heal()],
      ];
      for (const [fault, apply, undo] of faults) {
        // Database a serves the tag first; once it fails, b serves it, so b's fault follows.
        for (const [down, up] of [
          [0, 1],
          [1, 0],
        ] as const) {
          const d = dbs[down]!;
          await apply(d);
          const from = loads.map((l) => l.batches.length);
          // The servers first hand out the ranges they hold ahead (prefetched, up to 8 of 5,000
          // ids each, of either database): on a busy machine that alone can take 20 s.
          await until(
            `5,000 ids from database ${dbs[up]!.name} with ${d.name} ${fault}`,
            () => classSince(loads, from, up, 2) > 5_000,
            180_000,
          ).catch(async (error: Error) => {
            // What the servers saw, so that a failure here says why.
            error.message += `; ${classSince(loads, from, up, 2)} so far; ${await seen(servers, loads)}`;
            throw error;
          });
          report.push(
            `${d.name} ${fault}: ${classSince(loads, from, up, 2)} ids from ${dbs[up]!.name}`,
          );
          await undo(d);
          // Back: every server sees it answer again before the next fault.
          for (const s of servers) {
            await until(`database ${d.name} up on ${s.label}`, async () => {
              const lines = await metric(s, "leaf_segment_store_member_up");
              return lines.length === 2 && lines.every((l) => l.endsWith(" 1"));
            });
          }
        }
      }
      await Promise.all(loads.map((l) => l.stop()));
      const failed = loads.reduce((n, l, i) => n + l.refused - refusedWarm[i]!, 0);
      const count = countDuplicates(idsOf(loads));
      console.log(
        `residue set of 2 MariaDB, 2 servers: ${count.total} ids, ${count.duplicates} twice, ${failed} failed requests once warm; ${report.join("; ")}`,
      );
      expect(count.duplicates).toBe(0);
      expect(failed).toBe(0);

      // Both databases answer and have served: the monitor and the metrics say so (polled: a
      // call slower than hedgeMs on this busy machine shows its database as stalled meanwhile).
      type Monitor = {
        segment: { backend: { kind: string; target: string }; members: Record<string, unknown>[] };
      };
      let monitor: Monitor | undefined;
      await until("both databases serving on the monitor", async () => {
        monitor = await servers[1]!.getJson<Monitor>("/api/v1/monitor", 5_000);
        return monitor?.segment.members.every((m) => m.up === true) === true;
      });
      expect(monitor?.segment.backend.kind).toBe("residue");
      expect(monitor?.segment.backend.target).not.toContain("root:");
      expect(monitor?.segment.members.map((m) => [m.remainder, m.delta, m.up, m.state])).toEqual([
        [0, 2, true, "serving"],
        [1, 2, true, "serving"],
      ]);
      expect(monitor?.segment.members.every((m) => (m.rangesTaken as number) > 0)).toBe(true);
      const ranges = await metric(servers[0]!, "leaf_segment_store_member_ranges");
      expect(ranges).toHaveLength(2);
      let up: string[] = [];
      await until("both databases up in the metrics", async () => {
        up = await metric(servers[0]!, "leaf_segment_store_member_up");
        return up.length === 2 && up.every((l) => l.endsWith(" 1"));
      });
      expect(up.map((l) => l.replace(/member="[^"]*",/, ""))).toEqual([
        'leaf_segment_store_member_up{remainder="0"} 1',
        'leaf_segment_store_member_up{remainder="1"} 1',
      ]);
    } finally {
      await Promise.all(loads.map((l) => l.stop()));
      for (const s of servers) await s.stop();
      // Every database back for the next test, whichever fault a failure left in place.
      for (const d of dbs) {
        d.proxy.heal();
        if (d.db.running) d.db.resume();
        else await d.db.start();
      }
    }
  }, 600_000);
});

describe("the server on a mixed MariaDB + PostgreSQL residue set", () => {
  it("adds a third database by the command under load (2 to 3): no id twice", async () => {
    const two = [await mysqlMember(dbs[0]!), await postgresMember()];
    const formed = await formSet(two);
    expect(formed.code, formed.stderr).toBe(0);
    const dir = tempDir();
    // Tags read every minute (the default): the running servers meet the new residues through
    // the record read after each range, not through a refresh.
    const servers = [await startServer(dir, "one", two)];
    await createTag(servers[0]!.port, "t", 5_000);
    servers.push(await startServer(dir, "two", two));
    const loads = servers.map((s) => new Load(s.port, "/api/segment/get/t?count=20", 2, 4));
    try {
      await until("5,000 ids", () => loads.every((l) => l.ids > 5_000));
      const refusedWarm = loads.map((l) => l.refused);
      // MariaDB cut off for a moment: the tag moves to PostgreSQL and stays there, so that the
      // servers draw from another database than a server started later (which asks a first).
      dbs[0]!.proxy.cutOff();
      const cut = loads.map((l) => l.batches.length);
      await until("10,000 ids from PostgreSQL", () => classSince(loads, cut, 1, 2) > 10_000);
      dbs[0]!.proxy.heal();
      // The operator appends a database and runs the command; the servers keep serving.
      const three = [...two, await mysqlMember(dbs[1]!)];
      const grown = await formSet(three);
      expect(grown.code, grown.stderr).toBe(0);
      expect(grown.stdout).toMatch(/Formed the residue set [0-9a-f]{32}, epoch 1:/);
      const R = BigInt(
        /tag t: every database's ranges start at or above (\d+)/.exec(grown.stdout)![1]!,
      );
      // A server started on the three databases, beside the two running on two of them.
      const third = await startServer(dir, "three", three);
      servers.push(third);
      loads.push(new Load(third.port, "/api/segment/get/t?count=20", 2, 4));
      const from = loads.map((l) => l.batches.length);
      await until("20,000 more ids on every server", () =>
        loads.every((l, i) => l.batches.slice(from[i]).flat().length > 20_000),
      );
      await Promise.all(loads.map((l) => l.stop()));
      const count = countDuplicates(idsOf(loads));
      const failed = loads.slice(0, 2).reduce((n, l, i) => n + l.refused - refusedWarm[i]!, 0);
      console.log(
        `mixed residue set, 2 to 3 under load: ${count.total} ids, ${count.duplicates} twice, R = ${R}, ${failed} failed requests on the running servers`,
      );
      expect(count.duplicates).toBe(0);
      // The new server's ids are all above every id handed out before the set grew.
      expect(loads[2]!.batches.flat().filter((id) => BigInt(id) < R)).toEqual([]);
      const monitor = await third.getJson<{ segment: { members: { delta: number }[] } }>(
        "/api/v1/monitor",
        5_000,
      );
      expect(monitor?.segment.members.map((m) => m.delta)).toEqual([3, 3, 3]);
    } finally {
      await Promise.all(loads.map((l) => l.stop()));
      for (const s of servers) await s.stop();
      // Every database back for the next test, whichever fault a failure left in place.
      for (const d of dbs) {
        d.proxy.heal();
        if (d.db.running) d.db.resume();
        else await d.db.start();
      }
    }
  }, 600_000);
});
