// Waits, synchronously, until a SIGSTOP has taken effect. kill(2) returns as soon as the signal is
// queued; a multi-threaded server (mariadbd, a JVM, node) goes on running for a moment until every
// thread has been stopped, and a request sent in that moment is still answered. A test that pauses
// a server and expects silence must not start before the server is really silent.
import { readdirSync, readFileSync } from "node:fs";
import { TestkitError } from "./errors";

const POLL_MS = 1;
const sleepBuffer = new Int32Array(new SharedArrayBuffer(4));

/** The state letter and process group of /proc/{pid}/task/{tid}/stat (or /proc/{pid}/stat). */
function readStat(path: string): { state: string; pgrp: number } | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return undefined; // gone
  }
  // "pid (comm) S ppid pgrp ...": comm may hold spaces and parentheses, so split after the last
  // ')'.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0]!, pgrp: Number(fields[2]) };
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
 * Returns once every thread of `pid` (and, with `group`, of every process in the group it leads)
 * is stopped. Throws TESTKIT_PAUSE_FAILED after `timeoutMs`. Linux only (reads /proc).
 */
export function waitUntilStopped(
  pid: number,
  group: boolean,
  label: string,
  timeoutMs = 5_000,
): void {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pids = group ? groupMembers(pid) : [pid];
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
