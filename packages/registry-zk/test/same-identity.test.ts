// Two real processes running as the same ip:port in normal mode (two containers with the same
// bridge address): the second is refused while the first lives; and when the first is frozen
// (SIGSTOP) past its session timeout, the second gets the id. Resumed, the first must not issue a
// single id under it again with stopWithoutSession; by default (Java Leaf's availability) it loses
// its lease as soon as it sees the marker taken. Every id of both processes is counted.
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ErrorCodes, layouts } from "@leaf/core";
import {
  ChildLines,
  countRepeatedIds,
  spawnNode,
  startZookeeper,
  TcpProxy,
  waitUntilStopped,
  type ZookeeperHandle,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uniqueName, waitUntil } from "./helpers";

const HOLDER = fileURLToPath(new URL("./fixtures/normal-holder.ts", import.meta.url));
/** The holders' session timeout (see the fixture). */
const SESSION_TIMEOUT_MS = 2_000;

let zk: ZookeeperHandle;
let dir: string;

beforeAll(async () => {
  zk = await startZookeeper({ tickTime: 500, useEnv: false });
  dir = await mkdtemp(join(tmpdir(), "leaf-zk-same-identity-"));
});

afterAll(async () => {
  await zk?.dispose();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Holder {
  lines: ChildLines;
  out: string;
  kill(): void;
}

type Fencing = "strict" | "default";

function startHolder(
  name: string,
  label: string,
  fencing: Fencing,
  how: { connectString?: string; cacheFile?: string } = {},
): Holder {
  const out = join(dir, `${name}-${label}.ids`);
  const args = [how.connectString ?? zk.connectString, name, "10.7.0.1", "8080", out, fencing];
  const child = spawnNode(HOLDER, how.cacheFile ? [...args, how.cacheFile] : args);
  return {
    lines: new ChildLines(child),
    out,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}

/** The first JSON line of `holder` that has `key`. */
async function answer(holder: Holder, key: string, timeoutMs = 30_000) {
  await holder.lines.until(
    () => holder.lines.json().some((j) => key in j),
    `a line with "${key}"`,
    timeoutMs,
  );
  return holder.lines.json().find((j) => key in j)!;
}

/** Stops `holder` issuing, and returns its ids and the wall-clock time of its last one. */
async function collect(holder: Holder): Promise<{ ids: BigUint64Array; lastIdAt: number }> {
  holder.lines.child.stdin!.write("stop\n");
  const done = (await answer(holder, "count")) as { count: number; lastIdAt: number };
  const bytes = readFileSync(holder.out);
  const ids = new BigUint64Array(done.count);
  for (let i = 0; i < done.count; i++) ids[i] = bytes.readBigUInt64BE(i * 8);
  return { ids, lastIdAt: done.lastIdAt };
}

/** How many of `ids` (Leaf's layout) carry a time at or after `ms`. */
function issuedSince(ids: BigUint64Array, ms: number): number {
  const { leaf } = layouts;
  let n = 0;
  for (const id of ids) if (leaf.msAt(Number(id >> BigInt(leaf.timestampShift))) >= ms) n++;
  return n;
}

interface Outcome {
  first: { ids: BigUint64Array; lastIdAt: number };
  second: { ids: BigUint64Array; lastIdAt: number };
  resumedAt: number;
  lost: { lost: string; at: number };
}

/**
 * The first holder of an ip:port issues; a second process is refused while it lives; the first is
 * frozen, a third process (the "second" holder) takes the id once the first's session expired, and
 * the first is resumed. Returns every id of both holders and when the first lost its lease.
 */
async function frozenHolderScenario(fencing: Fencing): Promise<Outcome> {
  const name = uniqueName(`twin${fencing}`);
  const first = startHolder(name, "first", fencing);
  const holders = [first];
  try {
    const { workerId } = (await answer(first, "workerId")) as { workerId: number };
    // A second process as the same ip:port while the first lives: refused.
    const refused = startHolder(name, "refused", fencing);
    holders.push(refused);
    expect(await answer(refused, "error")).toEqual({ error: ErrorCodes.WORKER_ID_IN_USE });

    // Freeze the first past its session timeout while it issues: its marker goes.
    await sleep(500);
    first.lines.child.kill("SIGSTOP");
    waitUntilStopped(first.lines.child.pid!, false, "the first holder");
    const second = startHolder(name, "second", fencing);
    holders.push(second);
    expect(await answer(second, "workerId")).toEqual({ workerId });
    await sleep(SESSION_TIMEOUT_MS);
    const resumedAt = Date.now();
    first.lines.child.kill("SIGCONT");
    // The resumed holder finds the marker held by another process: its lease is lost.
    const lost = (await answer(first, "lost")) as { lost: string; at: number };
    await sleep(500);
    const a = await collect(first);
    const b = await collect(second);
    return { first: a, second: b, resumedAt, lost };
  } finally {
    for (const holder of holders) holder.kill();
  }
}

describe("normal mode: one live holder per ip:port, across processes", () => {
  it("with stopWithoutSession: refuses a second live process, and a frozen holder whose id was taken never issues again", async () => {
    const { first, second, resumedAt, lost } = await frozenHolderScenario("strict");
    expect(lost.lost).toBe(ErrorCodes.LEASE_LOST);
    expect(first.ids.length).toBeGreaterThan(0);
    expect(second.ids.length).toBeGreaterThan(0);
    expect(countRepeatedIds([first.ids, second.ids]).duplicates).toBe(0);
    // Not one id after it was resumed: the id had been taken over while it was frozen.
    expect(first.lastIdAt).toBeLessThan(resumedAt);
  }, 120_000);

  it("by default: refuses a second live process, and a frozen holder whose id was taken loses its lease as soon as it sees the marker taken", async () => {
    const { first, second, resumedAt, lost } = await frozenHolderScenario("default");
    expect(lost.lost).toBe(ErrorCodes.LEASE_LOST);
    expect(first.ids.length).toBeGreaterThan(0);
    expect(second.ids.length).toBeGreaterThan(0);
    const lostAfterMs = lost.at - resumedAt;
    const repeated = countRepeatedIds([first.ids, second.ids]).duplicates;
    const afterResume = issuedSince(first.ids, resumedAt);
    // What default mode does not prevent (README, "When the session is lost"): ids issued between
    // SIGCONT and the loss may repeat the second holder's. Printed for the record.
    console.log(
      `[same-identity default] lease lost ${lostAfterMs} ms after SIGCONT; the resumed holder ` +
        `issued ${afterResume} ids after SIGCONT, ${repeated} duplicate ids among ` +
        `${first.ids.length + second.ids.length}`,
    );
    // Lost at the first reattach, not at some later report: within one reattach attempt (the
    // session's silence limit, 2/3 of 2 s, plus a connection, at most connectTimeoutMs, 10 s).
    expect(lostAfterMs).toBeGreaterThanOrEqual(0);
    expect(lostAfterMs).toBeLessThan(12_000);
    // Nothing after the loss: the generator is fenced before the event is printed.
    expect(first.lastIdAt).toBeLessThanOrEqual(lost.at);
  }, 120_000);

  it("refuses a second process that saw the first's marker when ZooKeeper then stops answering it, rather than start it from the shared cache file", async () => {
    const name = uniqueName("twincache");
    // Both processes' cache file is one file (one host, one folder): the second could start from
    // it, as a node does when ZooKeeper is unreachable at its start.
    const cacheFile = join(dir, `${name}.workerID.json`);
    const first = startHolder(name, "first", "default", { cacheFile });
    const proxy = await TcpProxy.start({ targetPort: zk.port });
    const holders = [first];
    try {
      const { workerId } = (await answer(first, "workerId")) as { workerId: number };
      await waitUntil(() => existsSync(cacheFile), 10_000, "the first holder's cache file");
      const second = startHolder(name, "second", "default", {
        connectString: `127.0.0.1:${proxy.port}`,
        cacheFile,
      });
      holders.push(second);
      // Its session up, the second finds the marker held and waits for it to go (up to the
      // holder's session timeout + 1 s): ZooKeeper stops answering it there, past its silence
      // limit (2/3 of 2 s).
      await waitUntil(() => proxy.connections > 0, 30_000, "the second holder's connection");
      await sleep(700);
      proxy.pause();
      await sleep(4_000);
      proxy.resume();
      const started = (j: Record<string, unknown>) => "error" in j || "workerId" in j;
      await second.lines.until(() => second.lines.json().some(started), "its start", 30_000);
      const outcome = second.lines.json().find(started);
      const a = await collect(first);
      console.log(
        `[same-identity cache] the second printed ${JSON.stringify(outcome)}; the first (worker id ${workerId}) issued ${a.ids.length} ids`,
      );
      expect(outcome).toEqual({ error: ErrorCodes.WORKER_ID_IN_USE });
    } finally {
      for (const holder of holders) holder.kill();
      await proxy.close();
    }
  }, 120_000);

  it("does not start a holder that lost its id to another process again from its cache file while ZooKeeper is out of its reach", async () => {
    const name = uniqueName("twinlost");
    const cacheFile = join(dir, `${name}.first.json`);
    const proxy = await TcpProxy.start({ targetPort: zk.port });
    const first = startHolder(name, "first", "strict", {
      connectString: `127.0.0.1:${proxy.port}`,
      cacheFile,
    });
    const holders = [first];
    try {
      const { workerId } = (await answer(first, "workerId")) as { workerId: number };
      await waitUntil(() => existsSync(cacheFile), 10_000, "the first holder's cache file");
      await sleep(500);
      // Frozen past its session timeout: a second process as the same ip:port takes the id (with
      // stopWithoutSession, so that the first issues nothing after SIGCONT: each id twice below
      // is one of a cache start).
      first.lines.child.kill("SIGSTOP");
      waitUntilStopped(first.lines.child.pid!, false, "the first holder");
      const second = startHolder(name, "second", "strict");
      holders.push(second);
      expect(await answer(second, "workerId")).toEqual({ workerId });
      first.lines.child.kill("SIGCONT");
      const lost = (await answer(first, "lost")) as { lost: string; at: number };
      // Its worker acquires again (reacquire is on); ZooKeeper out of its reach past the connect
      // timeout (10 s), its only start would be its own cache file.
      proxy.pause();
      await sleep(15_000);
      proxy.resume();
      await sleep(1_000);
      const a = await collect(first);
      const b = await collect(second);
      const repeated = countRepeatedIds([a.ids, b.ids]).duplicates;
      console.log(
        `[same-identity lost] the first issued ${issuedSince(a.ids, lost.at + 1)} ids after its loss, ${repeated} duplicate ids among ${a.ids.length + b.ids.length}`,
      );
      expect(repeated).toBe(0);
      // Nothing after its loss: ids stamped past it would be the cache start's.
      expect(issuedSince(a.ids, lost.at + 1)).toBe(0);
    } finally {
      for (const holder of holders) holder.kill();
      await proxy.close();
    }
  }, 120_000);
});
