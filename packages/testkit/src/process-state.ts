// Waits, synchronously, until a SIGSTOP has taken effect. kill(2) returns as soon as the signal is
// queued; a multi-threaded server (mariadbd, a JVM, node) goes on running for a moment until every
// thread has been stopped, and a request sent in that moment is still answered. A test that pauses
// a server and expects silence must not start before the server is really silent.
import { readdirSync, readFileSync } from "node:fs";
import { TestkitError } from "./errors";

const POLL_MS = 1;
const sleepBuffer = new Int32Array(new SharedArrayBuffer(4));

/**
 * The state letter, parent and process group of /proc/{pid}/task/{tid}/stat (or /proc/{pid}/stat).
 */
function readStat(path: string): { state: string; ppid: number; pgrp: number } | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return undefined; // gone
  }
  // "pid (comm) S ppid pgrp ...": comm may hold spaces and parentheses, so split after the last
  // ')'.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0]!, ppid: Number(fields[1]), pgrp: Number(fields[2]) };
}

/** Pids of every process descended from `pid` (its children, theirs, ...), read from /proc. */
export function descendantsOf(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    const other = Number(entry);
    if (!Number.isInteger(other)) continue;
    const parent = readStat(`/proc/${other}/stat`)?.ppid;
    if (parent === undefined) continue;
    children.set(parent, [...(children.get(parent) ?? []), other]);
  }
  const found: number[] = [];
  const pending = [pid];
  while (pending.length > 0) {
    for (const child of children.get(pending.pop()!) ?? []) {
      found.push(child);
      pending.push(child);
    }
  }
  return found;
}

/** Pids of `pid` and of every process in the group `pid` leads. */
function groupMembers(pid: number): number[] {
  const members = [pid];
  for (const entry of readdirSync("/proc")) {
    const other = Number(entry);
    if (!Number.isInteger(other) || other === pid) continue;
    if (readStat(`/proc/${other}/stat`)?.pgrp === pid) members.push(other);
  }
  return members;
}

/** A thread that is stopped (T), traced (t), or dead (Z, X), or a process that is gone. */
function isStopped(pid: number): boolean {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return true; // gone
  }
  return tasks.every((tid) => {
    const state = readStat(`/proc/${pid}/task/${tid}/stat`)?.state;
    return state === undefined || state === "T" || state === "t" || state === "Z" || state === "X";
  });
}

/**
 * Returns once every thread of `pid` (and, with `group`, of every process in the group it leads;
 * with "descendants", of every process descended from it) is stopped. Throws
 * TESTKIT_PAUSE_FAILED after `timeoutMs`. Linux only (reads /proc).
 */
export function waitUntilStopped(
  pid: number,
  group: boolean | "descendants",
  label: string,
  timeoutMs = 5_000,
): void {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pids =
      group === "descendants" ? [pid, ...descendantsOf(pid)] : group ? groupMembers(pid) : [pid];
    if (pids.every(isStopped)) return;
    if (Date.now() > deadline) {
      throw new TestkitError(
        "TESTKIT_PAUSE_FAILED",
        `${label} (pid ${pid}) was sent SIGSTOP but not every thread had stopped after ${timeoutMs} ms`,
      );
    }
    Atomics.wait(sleepBuffer, 0, 0, POLL_MS);
  }
}

/** Whether `pid` has exited (a zombie has: its memory, files and shared memory are released). */
function exited(pid: number): boolean {
  const state = readStat(`/proc/${pid}/stat`)?.state;
  return state === undefined || state === "Z" || state === "X";
}

/**
 * Resolves once every process of `pids` has exited (signalled processes that are no children of
 * ours, so no exit event tells). Throws TESTKIT_NOT_RUNNING after `timeoutMs`. Linux only.
 */
export async function waitUntilExited(
  pids: number[],
  label: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = pids.filter((pid) => !exited(pid));
    if (left.length === 0) return;
    if (Date.now() > deadline) {
      throw new TestkitError(
        "TESTKIT_NOT_RUNNING",
        `processes ${left.join(", ")} of ${label} were killed but had not exited after ${timeoutMs} ms`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
