// Issue 11 item 2: a holder paused past its lease must not issue ids under the worker id another
// server now holds. Two real server processes share a one-id worker space (workerBits 0); the holder
// is SIGSTOPped under load, the other server takes the id and serves, then the holder gets SIGCONT
// with pipelined requests already waiting in its sockets (answered before any of its timers runs).
// Every id answered by either server is counted.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  countDuplicates,
  freePort,
  type MysqlHandle,
  PipelinedConnection,
  startMysql,
  startZookeeper,
  stopAll,
  type ZookeeperHandle,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Answer, idsOf, Load, serverProcess, sleep, until } from "./fault-servers";

const dirs: string[] = [];
let mysql: MysqlHandle;
let zookeeper: ZookeeperHandle;

beforeAll(async () => {
  [mysql, zookeeper] = await Promise.all([startMysql(), startZookeeper()]);
}, 180_000);

afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Batches that cross a tick boundary: the holder spends much of its time waiting for the next ms. */
const BATCH = "/api/snowflake/get/pause?count=5000";
/** Single ids: after a tick that slipped past the deadline, these take the fast path. */
const SINGLE = "/api/snowflake/get/pause";
/** Trials per registry: the pause lands at a random point of the holder's work. */
const TRIALS = 2;

interface TrialResult {
  total: number;
  duplicates: number;
  /** Ids the paused holder answered after SIGCONT to requests queued while it was stopped. */
  issuedAfterResume: number;
  refusedAfterResume: number;
}

async function pauseTrial(registry: Record<string, unknown>, trial: number): Promise<TrialResult> {
  const dir = mkdtempSync(join(tmpdir(), "leaf-pause-"));
  dirs.push(dir);
  const config = {
    name: `pause-${trial}-${Math.random().toString(36).slice(2, 8)}`,
    segment: { enabled: false },
    // One worker id in all: whoever issues, issues under worker id 0.
    snowflake: { enabled: true, ip: "127.0.0.1", workerBits: 0, ...registry },
  };
  const a = serverProcess("A", dir, await freePort(), config);
  const b = serverProcess("B", dir, await freePort(), config);
  const queued: Array<Promise<Answer[]>> = [];
  let loadA: Load | undefined;
  let loadB: Load | undefined;
  let singlesA: Load | undefined;
  let singlesB: Load | undefined;
  const waiting: PipelinedConnection[] = [];
  try {
    await a.start();
    loadA = new Load(a.port, BATCH);
    singlesA = new Load(a.port, SINGLE, 2, 32);
    await until("server A under load", () => loadA!.ids >= 300_000);
    for (let i = 0; i < 4; i++) waiting.push(await PipelinedConnection.open(a.port));
    // Somewhere in the middle of A's work (often inside a wait for the next millisecond).
    await sleep(Math.floor(Math.random() * 50));
    a.pause();
    // B starts once A's lease (or session) has run out; until then its start is refused.
    await until("server B taking the worker id", async () => (await b.tryStart()).started, 120_000);
    loadB = new Load(b.port, BATCH);
    singlesB = new Load(b.port, SINGLE, 2, 32);
    await until("server B under load", () => loadB!.ids >= 200_000);
    // Requests wait in A's sockets; A resumes with B still issuing.
    for (const connection of waiting) {
      queued.push(connection.get(SINGLE, 200), connection.get(BATCH, 4));
    }
    await sleep(100);
    a.resume();
    const answers = (await Promise.all(queued)).flat();
    await sleep(1000);
    await Promise.all([loadA.stop(), loadB.stop(), singlesA!.stop(), singlesB!.stop()]);
    const fromQueued = answers.map(idsOf);
    const counted = countDuplicates([
      ...loadA.batches,
      ...loadB.batches,
      ...singlesA!.batches,
      ...singlesB!.batches,
      ...fromQueued,
    ]);
    return {
      ...counted,
      issuedAfterResume: fromQueued.reduce((n, ids) => n + ids.length, 0),
      refusedAfterResume: answers.filter((answer) => answer.status !== 200).length,
    };
  } finally {
    if (a.running) a.resume();
    for (const connection of waiting) connection.close();
    await Promise.all([a.kill(), b.kill()]);
  }
}

describe("a holder paused (SIGSTOP) past its lease while another server takes the worker id", () => {
  it("MySQL lease mode: 0 duplicate ids after SIGCONT under pipelined load", async () => {
    const database = await mysql.createDatabase("leaf_pause");
    const registry = {
      registry: "mysql",
      mysql: {
        url: mysql.urlFor(database),
        password: "",
        mode: "lease",
        createTable: true,
        leaseMs: 3000,
      },
    };
    for (let trial = 0; trial < TRIALS; trial++) {
      const result = await pauseTrial(registry, trial);
      console.log(`mysql lease, trial ${trial + 1}:`, result);
      expect(result.total).toBeGreaterThan(500_000);
      expect(result.duplicates, `trial ${trial + 1}`).toBe(0);
    }
  }, 600_000);

  it("ZooKeeper recycle mode: 0 duplicate ids after SIGCONT under pipelined load", async () => {
    const registry = {
      registry: "zk",
      zk: {
        address: zookeeper.connectString,
        mode: "recycle",
        sessionTimeoutMs: 2000,
      },
    };
    for (let trial = 0; trial < TRIALS; trial++) {
      const result = await pauseTrial(registry, trial);
      console.log(`zk recycle, trial ${trial + 1}:`, result);
      expect(result.total).toBeGreaterThan(500_000);
      expect(result.duplicates, `trial ${trial + 1}`).toBe(0);
    }
  }, 600_000);
});
