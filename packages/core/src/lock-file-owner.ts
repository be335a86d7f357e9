// The owner record of a lock file and the judgement of its liveness: who wrote it (pid, host, boot
// id, PID namespace, process start time, token), whether that owner is provably gone, alive, or
// cannot be judged by its pid, and how long an unjudgeable one must go untouched to be stale.
import { randomBytes } from "node:crypto";
import { readFileSync, readlinkSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { readTextIfExists } from "./lease-cache";

/** Who holds a lock file: the JSON object the file holds. */
export interface LockFileOwner {
  /** The holder's process id. */
  pid: number;
  /** The holder's host name (`os.hostname()`); a pid is only judged on the host that wrote it. */
  host: string;
  /**
   * The kernel's boot id (`/proc/sys/kernel/random/boot_id`, Linux): a pid is only judged by a
   * process of the same boot of the same kernel. Missing off Linux.
   */
  bootId?: string;
  /**
   * The holder's PID namespace (`readlink /proc/self/ns/pid`, e.g. "pid:[4026531836]", Linux): a
   * pid means nothing in another namespace (containers, `unshare --pid`), so it is only judged by a
   * process of the same namespace. Missing off Linux.
   */
  pidNamespace?: string;
  /** The process's start time as the kernel counts it (Linux), to tell a reused pid apart. */
  processStart: string | undefined;
  /** Random per lock: says which holding this is, even within one process. */
  token: string;
  /** What the holder uses the lock for, in words (e.g. a node "10.0.0.9:8080"), for messages. */
  label?: string;
  /**
   * The holder's `foreignStaleAfterMs`: it touches the lock every quarter of this and stops acting
   * under it half of this after its last touch (`fenceAt`). Only a lock that records it is ever
   * taken over by age, and only once untouched for the longer of this and the taker's own setting.
   * Missing when the holder does not heartbeat (it took the lock without `foreignStaleAfterMs`).
   */
  staleAfterMs?: number;
  /** When the lock was taken, ms since the Unix epoch. */
  acquiredAt: number;
}

/** Tokens of the locks this process holds, shared by every copy of this module it loaded. */
export const held: Set<string> = sharedHeldSet();

function sharedHeldSet(): Set<string> {
  const key = Symbol.for("@leaf/core.heldLockFiles");
  const global = globalThis as Record<symbol, unknown>;
  if (!(global[key] instanceof Set)) global[key] = new Set<string>();
  return global[key] as Set<string>;
}

/**
 * Reads the owner of a lock file: undefined when there is none, "unreadable" when the file holds no
 * owner record. Throws the file system's error when it cannot be read.
 */
export function readLockFile(path: string): LockFileOwner | "unreadable" | undefined {
  const text = readTextIfExists(path);
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as Partial<LockFileOwner>;
    if (
      typeof value === "object" &&
      value !== null &&
      Number.isInteger(value.pid) &&
      typeof value.host === "string" &&
      typeof value.token === "string"
    ) {
      return value as LockFileOwner;
    }
  } catch {
    // Not JSON: unreadable.
  }
  return "unreadable";
}

export function newOwner(
  label: string | undefined,
  staleAfterMs: number | undefined,
): LockFileOwner {
  const here = thisProcess();
  return {
    pid: process.pid,
    host: hostname(),
    ...(here.bootId === undefined ? {} : { bootId: here.bootId }),
    ...(here.pidNamespace === undefined ? {} : { pidNamespace: here.pidNamespace }),
    // /proc/self, not /proc/<pid>: under `unshare --pid` without its own /proc the two differ.
    processStart: procStat("self")?.start,
    token: randomToken(),
    ...(label === undefined ? {} : { label }),
    ...(staleAfterMs === undefined ? {} : { staleAfterMs }),
    acquiredAt: Date.now(),
  };
}

/**
 * What identifies this process's view of pids: boot, PID namespace, and whether /proc matches it.
 */
interface ProcessView {
  bootId: string | undefined;
  pidNamespace: string | undefined;
  /** True when /proc/<pid> shows this namespace's pids (its /proc/self is our pid). */
  procMatches: boolean;
}

let view: ProcessView | undefined;

function thisProcess(): ProcessView {
  if (view) return view;
  let bootId: string | undefined;
  let pidNamespace: string | undefined;
  let procMatches = false;
  try {
    bootId = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || undefined;
  } catch {
    // Not Linux: no boot id, so no pid can be judged across processes (see isStale).
  }
  try {
    pidNamespace = readlinkSync("/proc/self/ns/pid");
  } catch {
    // Not Linux, or /proc is not mounted.
  }
  try {
    procMatches = Number(readFileSync("/proc/self/stat", "utf8").split(" ")[0]) === process.pid;
  } catch {
    // No /proc.
  }
  view = { bootId, pidNamespace, procMatches };
  return view;
}

export function randomToken(): string {
  return randomBytes(12).toString("hex");
}

export function readOwnerToken(path: string): string | undefined {
  const owner = readLockFile(path);
  return typeof owner === "object" ? owner.token : undefined;
}

/**
 * Whether the owner of a lock may be replaced: provably gone, or unjudgeable and untouched long.
 */
export function isStale(
  path: string,
  owner: LockFileOwner,
  foreignStaleAfterMs: number | undefined,
): boolean {
  const verdict = judgeOwner(owner);
  if (verdict === "dead") return true;
  if (verdict === "alive") return false;
  const staleAfter = staleAfterFor(owner, foreignStaleAfterMs);
  return staleAfter !== undefined && ageMs(path) >= staleAfter;
}

/**
 * How long a lock of `owner` that cannot be judged by pid must go untouched before it is taken
 * over: the longer of the taker's and the holder's setting; undefined (never) when either has none,
 * since a holder that does not record one does not heartbeat and fence as this needs.
 */
export function staleAfterFor(
  owner: LockFileOwner,
  foreignStaleAfterMs: number | undefined,
): number | undefined {
  const recorded = owner.staleAfterMs;
  if (foreignStaleAfterMs === undefined) return undefined;
  if (typeof recorded !== "number" || !Number.isFinite(recorded) || recorded <= 0) return undefined;
  return Math.max(foreignStaleAfterMs, recorded);
}

/**
 * Whether the owner of a lock is provably gone ("dead"), surely or possibly running ("alive"), or
 * cannot be judged by its pid at all (a string saying why: another host, boot or PID namespace).
 */
export function judgeOwner(owner: LockFileOwner): "dead" | "alive" | string {
  if (owner.host !== hostname()) return `it was written on another host (${owner.host})`;
  const here = thisProcess();
  if (owner.bootId === undefined || here.bootId === undefined) {
    return "it records no boot id (not written on Linux)";
  }
  if (owner.bootId !== here.bootId) {
    return `it was written in another boot (boot id ${owner.bootId}, here ${here.bootId}): by this machine before a reboot, or by another machine of the same name`;
  }
  if (owner.pidNamespace === undefined || owner.pidNamespace !== here.pidNamespace) {
    return `it was written in another PID namespace (${owner.pidNamespace ?? "not recorded"}, here ${here.pidNamespace ?? "unknown"}), such as another container, where its pid ${owner.pid} means another process`;
  }
  if (owner.pid === process.pid) return held.has(owner.token) ? "alive" : "dead";
  if (!processAlive(owner.pid)) return "dead";
  // /proc of another namespace (unshare --pid without its own /proc) shows other processes.
  if (!here.procMatches) return "alive";
  const stat = procStat(String(owner.pid));
  if (!stat) return "alive";
  // A zombie has exited (its parent has not reaped it yet); another start time is a reused pid.
  if (stat.state === "Z") return "dead";
  return owner.processStart !== undefined && stat.start !== owner.processStart ? "dead" : "alive";
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** State and start time (clock ticks since boot) from /proc/PID/stat; undefined off Linux. */
function procStat(pid: string): { state: string; start: string | undefined } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count from the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0] ?? "", start: fields[19] };
  } catch {
    return undefined;
  }
}

/** ms since the file was last modified (0 when it is gone). */
export function ageMs(path: string): number {
  try {
    return Date.now() - statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}
