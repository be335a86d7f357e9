// LocalRegistry across real processes: one holder per worker id among processes racing for it (also
// across PID namespaces), a SIGKILLed holder's id taken over with its last timestamp, a restart in
// a new PID namespace (a container restart) getting its id back once the old lock went untouched, a
// SIGSTOPped holder whose id is taken meanwhile issuing nothing after resuming, and a cache file
// that survives kill -9 in the middle of being rewritten.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { layouts } from "@leaf/core";
import { readLeaseCache, readLockFile } from "@leaf/core/adapter";
import { ChildLines, countRepeatedIds, spawnNode, stopAll, waitUntilStopped } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";

const root = mkdtempSync(join(tmpdir(), "leaf-local-proc-"));
afterAll(async () => {
  await stopAll();
  rmSync(root, { recursive: true, force: true });
});
let dirs = 0;
const freshDir = () => join(root, `d${dirs++}`);
const holdWorker = join(import.meta.dirname, "fixtures/hold-worker.ts");
const writeLoop = join(import.meta.dirname, "fixtures/write-loop.ts");

interface Outcome {
  ok: boolean;
  pid: number;
  workerId?: number;
  lastTimestamp?: number;
  code?: string;
  message?: string;
  /** When acquire was called and when it resolved (ms since the epoch). */
  startedAt: number;
  acquiredAt?: number;
}

function hold(dir: string, workerId: number, ip = "10.0.0.1"): ChildLines {
  return new ChildLines(spawnNode(holdWorker, [dir, String(workerId), ip]));
}

const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const namespaced = new Set<ChildLines>();
afterAll(async () => {
  await Promise.all([...namespaced].map((child) => child.kill()));
});

/** Runs a fixture in a PID namespace of its own (`unshare --pid --fork`), where it is pid 1. */
function inOwnPidNamespace(script: string, args: string[]): ChildLines {
  const command = [process.execPath, "--import", tsx, script, ...args];
  const child = spawn("unshare", ["--pid", "--fork", "--kill-child", ...command], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = new ChildLines(child);
  namespaced.add(lines);
  return lines;
}

/** hold() in a PID namespace of its own, where the holder is pid 1. */
function holdInOwnPidNamespace(
  dir: string,
  workerId: number,
  ip: string,
  staleAfterMs?: number,
): ChildLines {
  const args = [dir, String(workerId), ip, ...(staleAfterMs ? [String(staleAfterMs)] : [])];
  return inOwnPidNamespace(holdWorker, args);
}

/** The pid on the host of a fixture (which prints it first: it may be pid 1 in its namespace). */
async function hostPid(child: ChildLines): Promise<number> {
  await child.until((lines) => lines.some((l) => l.includes('"hostPid"')), "its host pid");
  return child.json<{ hostPid?: number }>().find((l) => l.hostPid)!.hostPid!;
}

/** Waits until every child is ready, then tells them all to acquire at once. */
async function race(children: ChildLines[]): Promise<Outcome[]> {
  await Promise.all(children.map((c) => c.until((lines) => lines.some(isReady), "ready")));
  for (const child of children) child.child.stdin!.write("go\n");
  return Promise.all(children.map(outcome));
}

const isReady = (line: string) => line.startsWith('{"ready":true');

async function outcome(child: ChildLines): Promise<Outcome> {
  await child.until((lines) => lines.some((l) => l.includes('"ok"')), "the acquire outcome");
  return child.json<Outcome>().find((line) => "ok" in line)!;
}

describe("worker id locks between processes", () => {
  it("lets exactly one of eight processes racing for the same worker id hold it", async () => {
    const dir = freshDir();
    const children = Array.from({ length: 8 }, (_, i) => hold(dir, 11, `10.0.1.${i + 1}`));
    const outcomes = await race(children);
    const winners = outcomes.filter((o) => o.ok);
    expect(winners).toHaveLength(1);
    for (const loser of outcomes.filter((o) => !o.ok)) {
      expect(loser.code).toBe("WORKER_ID_IN_USE");
      expect(loser.message).toContain(`pid ${winners[0]!.pid}`);
    }
    await Promise.all(children.map((c) => c.kill()));
  });

  it("gives a SIGKILLed holder's id to the next process, starting after its last report", async () => {
    const dir = freshDir();
    const first = hold(dir, 12);
    expect((await race([first]))[0]!.ok).toBe(true);
    await first.until(
      (lines) => lines.filter((l) => l.includes("reported")).length >= 5,
      "reports",
    );
    await first.kill();
    const reports = first.json<{ reported?: number }>().flatMap((l) => l.reported ?? []);
    const next = hold(dir, 12, "10.0.0.2");
    const [taken] = await race([next]);
    expect(taken!.ok).toBe(true);
    expect(taken!.lastTimestamp).toBeGreaterThanOrEqual(Math.max(...reports));
    await next.kill();
  });

  it("lets exactly one of eight processes take over a lock left by a dead process", async () => {
    const dir = freshDir();
    const dead = hold(dir, 13);
    expect((await race([dead]))[0]!.ok).toBe(true);
    await dead.kill();
    const children = Array.from({ length: 8 }, (_, i) => hold(dir, 13, `10.0.2.${i + 1}`));
    const outcomes = await race(children);
    expect(outcomes.filter((o) => o.ok)).toHaveLength(1);
    expect(outcomes.filter((o) => !o.ok).map((o) => o.code)).toEqual(
      Array(7).fill("WORKER_ID_IN_USE"),
    );
    await Promise.all(children.map((c) => c.kill()));
    // No claim file of the takeover is left behind.
    const left = readdirSync(join(dir, "fixture")).filter((name) => name.includes(".claim"));
    expect(left).toEqual([]);
  });
});

describe("worker id locks between PID namespaces", () => {
  it("refuses a process of the same host in another PID namespace (unshare --pid), though both are pid 1", async () => {
    const dir = freshDir();
    const first = holdInOwnPidNamespace(dir, 14, "10.0.3.1", 1_500);
    const [held] = await race([first]);
    expect(held).toMatchObject({ ok: true, pid: 1, workerId: 14 });
    // Its pid 1 is the second one's own pid: that must not read as "my own stale lock". The second
    // waits for the lock to go untouched, and is refused once the live holder touches it.
    const second = holdInOwnPidNamespace(dir, 14, "10.0.3.2", 1_500);
    const [refused] = await race([second]);
    expect(refused).toMatchObject({ ok: false, pid: 1, code: "WORKER_ID_IN_USE" });
    expect(refused!.message).toContain(`pid 1 on host ${hostname()} for node 10.0.3.1:8080`);
    expect(refused!.message).toContain("another PID namespace");
    expect(refused!.message).toContain("touched or changed hands while this process waited");
    // The holder keeps its lease: its reports go on, none of them failing.
    const reports = first.lines.filter((l) => l.includes('"reported"')).length;
    await first.until(
      (lines) => lines.filter((l) => l.includes('"reported"')).length >= reports + 5,
      "further reports",
    );
    expect(first.lines.filter((l) => l.includes("reportFailed"))).toEqual([]);
    await Promise.all([first.kill(), second.kill()]);
  });
});

describe("worker id locks across a container restart (a new PID namespace)", () => {
  it("gives a SIGKILLed holder's id to a holder in another PID namespace once its lock went untouched for staleAfterMs, not before", async () => {
    const dir = freshDir();
    const staleAfterMs = 5_000;
    const first = holdInOwnPidNamespace(dir, 15, "10.0.5.1", staleAfterMs);
    expect((await race([first]))[0]).toMatchObject({ ok: true, pid: 1, workerId: 15 });
    await first.until(
      (lines) => lines.filter((l) => l.includes("reported")).length >= 5,
      "reports",
    );
    // The restarted container: started before the old one dies, so that it asks right away.
    const next = holdInOwnPidNamespace(dir, 15, "10.0.5.2", staleAfterMs);
    await next.until((lines) => lines.some(isReady), "the new holder's start");
    process.kill(await hostPid(first), "SIGKILL");
    await first.exited;
    const lockFile = join(dir, "fixture", "worker-15.lock");
    // The lock stays, naming pid 1 of a namespace that no longer exists.
    expect(readLockFile(lockFile)).toMatchObject({ pid: 1, label: "node 10.0.5.1:8080" });
    const touchedAt = statSync(lockFile).mtimeMs;
    const reports = first.json<{ reported?: number }>().flatMap((l) => l.reported ?? []);
    const [taken] = await race([next]);
    expect(taken).toMatchObject({ ok: true, pid: 1, workerId: 15 });
    // It asked while the lock was fresh, waited, and got it once untouched for staleAfterMs.
    expect(taken!.startedAt).toBeLessThan(touchedAt + staleAfterMs);
    expect(taken!.acquiredAt).toBeGreaterThanOrEqual(touchedAt + staleAfterMs);
    expect(taken!.lastTimestamp).toBeGreaterThanOrEqual(Math.max(...reports));
    expect(readLockFile(lockFile)).toMatchObject({ pid: 1, label: "node 10.0.5.2:8080" });
    await next.kill();
  });

  it("a holder SIGSTOPped past staleAfterMs while another PID namespace takes its id issues no id after its fenceAt, and loses the lease: no duplicate", async () => {
    const dir = freshDir();
    const staleAfterMs = 3_000;
    const files = [join(dir, "a.ids"), join(dir, "b.ids")];
    const issuer = (ip: string, file: string) =>
      inOwnPidNamespace(issueIds, [dir, "21", ip, String(staleAfterMs), file]);
    const statuses = (child: ChildLines) => child.json<IssuerStatus>().filter((l) => "issued" in l);
    const issuedBy = (child: ChildLines) => statuses(child).at(-1)?.issued ?? 0;

    const a = issuer("10.0.6.1", files[0]!);
    await a.until(() => issuedBy(a) >= 20_000, "the first holder's ids", 120_000);
    const aPid = await hostPid(a);
    // Paused under load: in the middle of a long batch, its event loop blocked issuing ids.
    a.child.stdin!.write("long\n");
    await a.until((lines) => lines.includes('{"longBatch":true}'), "a long batch under way");
    process.kill(aPid, "SIGSTOP");
    waitUntilStopped(aPid, false, "holder A");
    const b = issuer("10.0.6.2", files[1]!);
    await b.until(
      (lines) => lines.some((l) => l.startsWith('{"ok":true')),
      "the takeover",
      120_000,
    );
    await b.until(() => issuedBy(b) >= 20_000, "the second holder's ids", 120_000);
    const resumedAt = Date.now();
    process.kill(aPid, "SIGCONT");
    await a.until((lines) => lines.some((l) => l.includes('"lease-lost"')), "the lost lease");
    const before = issuedBy(b);
    await b.until(() => issuedBy(b) >= before + 20_000, "more ids of the second holder");
    for (const child of [a, b]) child.child.stdin!.write("stop\n");
    await Promise.all([a, b].map((c) => c.until((l) => l.some(isDone), "its end", 60_000)));

    const [idsA, idsB] = files.map(readIds) as [BigUint64Array, BigUint64Array];
    expect(idsA.length).toBe(final(a).issued);
    expect(idsB.length).toBe(final(b).issued);
    expect(idsB.length).toBeGreaterThan(0);
    expect(countRepeatedIds([idsA, idsB]).duplicates).toBe(0);
    // Nothing the first issued is from after it resumed, nor from the second's time.
    const timeOf = (id: bigint) => layouts.leaf.decompose(id).timestampMs;
    const lastA = timeOf(sorted(idsA).at(-1)!);
    const firstB = timeOf(sorted(idsB)[0]!);
    expect(lastA).toBeLessThan(resumedAt);
    expect(lastA).toBeLessThan(firstB);
    expect(a.json<{ event?: string; code?: string }>()).toContainEqual({
      event: "lease-lost",
      code: "LEASE_LOST",
    });
    expect(final(a).errors.LEASE_LOST).toBeGreaterThan(0);
  });
});

interface IssuerStatus {
  issued: number;
  errors: Record<string, number>;
  done?: boolean;
}

const issueIds = join(import.meta.dirname, "fixtures/issue-ids.ts");
const isDone = (line: string) => line.startsWith('{"done":true');
const final = (child: ChildLines) => child.json<IssuerStatus>().find((l) => l.done)!;

/** The ids a fixture wrote (8 bytes each, little-endian). */
function readIds(file: string): BigUint64Array {
  const bytes = readFileSync(file);
  const ids = new BigUint64Array(bytes.length / 8);
  new Uint8Array(ids.buffer).set(bytes);
  return ids;
}

const sorted = (ids: BigUint64Array) => ids.slice().sort();

describe("the cache file under kill -9", () => {
  it("still parses after its writer is SIGKILLed in the middle of rewriting it", async () => {
    const dir = freshDir();
    for (let round = 0; round < 3; round++) {
      const writer = new ChildLines(spawnNode(writeLoop, [dir]));
      await writer.until((lines) => lines.length >= 2 + round, "a few hundred writes");
      const acknowledged = Number(writer.lines.at(-1));
      await writer.kill();
      const cached = readLeaseCache(join(dir, "fixture", "worker-7.json"));
      expect(cached?.workerId).toBe(7);
      expect(cached!.timestamp).toBeGreaterThanOrEqual(acknowledged);
    }
  });
});
