// `pnpm bench restart-waste`: the ids a `kill -9` loses. A server process (apps/server/dist/cli.js,
// as `pnpm start` runs it) on a MySQL `leaf_alloc` table of TAGS tags, every one of them touched in
// the last hour (as on a table other nodes use); its clients ask for SERVED of them. Each life:
// start, IDS_PER_TAG ids of each served tag, `kill -9`. Ids taken = how far the table's max_ids
// moved, ids served = the ids the clients got, wasted = taken - served (a gap, never handed out).
// One row with the defaults, then the opt-in load policies for comparison.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { MysqlSegmentStore } from "@leaf/segment-mysql";
import { freePort, LeafServerProcess, startMysql, stopAll } from "@leaf/testkit";
import { type BenchRow, report } from "./_report";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CLI = join(root, "apps/server/dist/cli.js");
const TAGS = 20;
const SERVED = 2;
const STEP = 1000;
const IDS_PER_TAG = 500;
const RESTARTS = 5;

const POLICIES: Array<{ name: string; segment: Record<string, unknown> }> = [
  { name: "segment restart waste, defaults (load=lazy)", segment: {} },
  { name: "segment restart waste, load=recent", segment: { load: "recent" } },
  { name: "segment restart waste, load=eager", segment: { load: "eager" } },
];

async function main(): Promise<void> {
  const mysql = await startMysql({ useEnv: false });
  const dir = mkdtempSync(join(tmpdir(), "leaf-bench-restart-"));
  const rows: BenchRow[] = [];
  try {
    for (const policy of POLICIES) {
      const database = await mysql.createDatabase("leaf_bench_restart");
      const store = new MysqlSegmentStore({
        url: mysql.urlFor(database),
        user: mysql.user,
        password: mysql.password,
      });
      await store.createSchema();
      const tags = Array.from({ length: TAGS }, (_, i) => `tag-${String(i).padStart(2, "0")}`);
      for (const tag of tags) await store.createTag({ tag, step: STEP, startId: 1n });
      const served = tags.slice(0, SERVED);
      const maxIds = async () => new Map((await store.describeTags()).map((r) => [r.tag, r.maxId]));
      const sum = (ids: Map<string, bigint>) => [...ids.values()].reduce((a, b) => a + b, 0n);
      const server = new LeafServerProcess({
        cli: CLI,
        label: "restart",
        dir,
        port: await freePort(),
        dataDir: join(dir, `${rows.length}-data`),
        config: {
          snowflake: { enabled: false },
          segment: {
            mysql: {
              url: mysql.urlFor(database),
              username: mysql.user,
              password: mysql.password ?? "",
            },
            ...policy.segment,
          },
        },
      });
      let taken = 0n;
      let servedIds = 0;
      for (let life = 0; life < RESTARTS; life++) {
        const before = await maxIds();
        await server.start();
        for (const tag of served) {
          const body = await server.getJson<{ ids: string[] }>(
            `/api/v1/segment/${tag}/ids?count=${IDS_PER_TAG}`,
            10_000,
          );
          if (body === undefined) throw new Error(`no ids for ${tag}:\n${server.output}`);
          servedIds += body.ids.length;
        }
        // The background load of the next range (at 10% of the first) is part of what a node
        // holds: wait until the table shows it, as it would on a node that runs on.
        const deadline = Date.now() + 10_000;
        const bothRanges = async () => {
          const now = await maxIds();
          return served.every((tag) => now.get(tag)! - before.get(tag)! >= BigInt(2 * STEP));
        };
        while (!(await bothRanges()) && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await server.kill();
        taken += sum(await maxIds()) - sum(before);
      }
      await store.close();
      const wasted = taken - BigInt(servedIds);
      rows.push({
        name: policy.name,
        tags: TAGS,
        servedTags: SERVED,
        restarts: RESTARTS,
        idsServedPerRestart: servedIds / RESTARTS,
        idsTakenPerRestart: Number(taken) / RESTARTS,
        idsWastedPerRestart: Number(wasted) / RESTARTS,
        rangesTakenPerRestart: Number(taken) / STEP / RESTARTS,
      });
    }
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
  report(
    "restart-waste",
    rows,
    `${TAGS} tags of step ${STEP} on MySQL, all touched in the last hour; ${SERVED} served, ` +
      `${IDS_PER_TAG} ids each per life, then kill -9. A served tag holds its current range and the ` +
      "next (loaded at 10% of the current): those are lost at every kill. Under load=recent or eager " +
      "every tag also takes a range at each start, served or not.",
  );
}

await main();
