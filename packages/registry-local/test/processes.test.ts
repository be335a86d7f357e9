// LocalRegistry across real processes: one holder per worker id among processes racing for it (also
// across PID namespaces), a SIGKILLed holder's id taken over with its last timestamp, and a cache
// file that survives kill -9 in the middle of being rewritten.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { readLeaseCache } from "@leaf/core";
import { ChildLines, spawnNode, stopAll } from "@leaf/testkit";
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
}

function hold(dir: string, workerId: number, ip = "10.0.0.1"): ChildLines {
  return new ChildLines(spawnNode(holdWorker, [dir, String(workerId), ip]));
}

const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const namespaced = new Set<ChildLines>();
afterAll(async () => {
  await Promise.all([...namespaced].map((child) => child.kill()));
});

/** hold() in a PID namespace of its own (`unshare --pid --fork`), where the holder is pid 1. */
function holdInOwnPidNamespace(dir: string, workerId: number, ip: string): ChildLines {
  const command = [process.execPath, "--import", tsx, holdWorker, dir, String(workerId), ip];
  const child = spawn("unshare", ["--pid", "--fork", "--kill-child", ...command], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const lines = new ChildLines(child);
  namespaced.add(lines);
  return lines;
}

/** Waits until every child is ready, then tells them all to acquire at once. */
async function race(children: ChildLines[]): Promise<Outcome[]> {
  await Promise.all(
    children.map((c) => c.until((lines) => lines.includes('{"ready":true}'), "ready")),
  );
  for (const child of children) child.child.stdin!.write("go\n");
  return Promise.all(children.map(outcome));
}

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
    const first = holdInOwnPidNamespace(dir, 14, "10.0.3.1");
    const [held] = await race([first]);
    expect(held).toMatchObject({ ok: true, pid: 1, workerId: 14 });
    // Its pid 1 is the second one's own pid: that must not read as "my own stale lock".
    const second = holdInOwnPidNamespace(dir, 14, "10.0.3.2");
    const [refused] = await race([second]);
    expect(refused).toMatchObject({ ok: false, pid: 1, code: "WORKER_ID_IN_USE" });
    expect(refused!.message).toContain(`pid 1 on host ${hostname()} for node 10.0.3.1:8080`);
    expect(refused!.message).toContain("another PID namespace");
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
