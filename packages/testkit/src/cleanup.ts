// Everything this process started, and the three ways it is cleaned up: stopAll() from a test,
// handlers for exit and fatal signals, and a detached watchdog process for when this one is
// SIGKILLed.
import { type ChildProcess, spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { descendantsOf } from "./process-state";

/** Something the kit started that must not outlive this process. */
export interface Tracked {
  /** Stops it and removes its files; resolves once it is gone. */
  dispose(): Promise<void>;
  /** Last resort while the process exits: SIGKILL and remove files, synchronously. */
  killNow(): void;
}

const tracked = new Set<Tracked>();
const watchedDirs = new Set<string>();
const watchedPids = new Set<number>();
let watchdog: ChildProcess | undefined;
let handlersInstalled = false;

/** Registers a resource for stopAll() and for the exit handlers. */
export function track(resource: Tracked): void {
  installHandlers();
  tracked.add(resource);
}

/** Forgets a resource that has been disposed. */
export function untrack(resource: Tracked): void {
  tracked.delete(resource);
}

/**
 * Stops every server and child process this process started through the kit and removes their temp
 * folders; external servers only drop the databases the kit created on them. Call it in a global
 * `afterAll`; it is safe to call more than once.
 */
export async function stopAll(): Promise<void> {
  const results = await Promise.allSettled([...tracked].map((resource) => resource.dispose()));
  const failures = results.filter((result): result is PromiseRejectedResult => {
    return result.status === "rejected";
  });
  if (failures.length > 0) {
    throw new AggregateError(
      failures.map((failure) => failure.reason),
      `[leaf] [testkit] stopAll: ${failures.length} resource(s) failed to stop`,
    );
  }
}

/** Sends `signal` to the process group led by `pid` and to `pid` itself; a gone process is fine. */
export function killTree(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // Not a group leader (or already gone): signal the process alone below.
  }
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

/**
 * Sends `name` to `pid` and every process descended from it, for a server whose children leave its
 * process group (PostgreSQL's backends each call setsid). For SIGSTOP and SIGKILL the tree is
 * frozen first, parent before children, so no process forks a child the listing misses. Returns
 * the descendants signalled.
 */
export function killDescendants(pid: number, name: NodeJS.Signals): number[] {
  if (name !== "SIGSTOP" && name !== "SIGKILL") {
    const children = descendantsOf(pid);
    for (const child of children) signal(child, name);
    signal(pid, name);
    return children;
  }
  signal(pid, "SIGSTOP");
  const frozen = new Set<number>();
  for (;;) {
    const found = descendantsOf(pid).filter((child) => !frozen.has(child));
    if (found.length === 0) break;
    for (const child of found) {
      signal(child, "SIGSTOP");
      frozen.add(child);
    }
  }
  if (name === "SIGKILL") for (const child of [pid, ...frozen]) signal(child, "SIGKILL");
  return [...frozen];
}

/** Removes a folder synchronously, retrying while a just-killed server still writes into it. */
export function removeDirSync(dir: string): void {
  rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
}

function killAllNow(): void {
  for (const resource of tracked) {
    try {
      resource.killNow();
    } catch {
      // Keep going: the watchdog retries whatever is left once this process is gone.
    }
  }
  tracked.clear();
}

function onSignal(signal: NodeJS.Signals): void {
  killAllNow();
  // With no other listener, the default action (terminate) must still happen, as if the kit had
  // never listened; with others (a test runner), they decide.
  if (process.listenerCount(signal) === 1) {
    process.removeListener(signal, onSignal);
    process.kill(process.pid, signal);
  }
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on("exit", killAllNow);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, onSignal);
}

function send(message: Record<string, unknown>): void {
  const child = ensureWatchdog();
  if (!child?.stdin?.writable) return;
  child.stdin.write(`${JSON.stringify(message)}\n`);
}

function ensureWatchdog(): ChildProcess | undefined {
  if (watchdog && watchdog.exitCode === null && watchdog.signalCode === null) return watchdog;
  const script = fileURLToPath(new URL("./watchdog.mjs", import.meta.url));
  // Detached: a signal to this process's group (Ctrl-C, a runner killing the group) must not take
  // the watchdog down before it has cleaned up. No loader flags: it is plain JavaScript.
  const child = spawn(process.execPath, [script, String(process.pid)], {
    detached: true,
    stdio: ["pipe", "ignore", "ignore"],
    env: { ...process.env, NODE_OPTIONS: "" },
  });
  child.unref();
  child.stdin?.on("error", () => {
    // The watchdog died; the next message starts a new one, which gets the current state.
  });
  (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  watchdog = child;
  for (const dir of watchedDirs) child.stdin?.write(`${JSON.stringify({ op: "dir", dir })}\n`);
  for (const pid of watchedPids) child.stdin?.write(`${JSON.stringify({ op: "pid", pid })}\n`);
  return child;
}

/** Asks the watchdog to remove `dir` (and kill whatever runs from it) if this process dies. */
export function watchDir(dir: string): void {
  installHandlers();
  watchedDirs.add(dir);
  send({ op: "dir", dir });
}

/** `dir` has been removed by this process. */
export function forgetDir(dir: string): void {
  watchedDirs.delete(dir);
  if (watchdog) send({ op: "forget-dir", dir });
}

/** Asks the watchdog to SIGKILL `pid` if this process dies. */
export function watchPid(pid: number): void {
  installHandlers();
  watchedPids.add(pid);
  send({ op: "pid", pid });
}

/** `pid` has exited. */
export function forgetPid(pid: number): void {
  watchedPids.delete(pid);
  if (watchdog) send({ op: "forget-pid", pid });
}

/** Pid of this process's watchdog, when one runs (for the kit's own tests). */
export function watchdogPid(): number | undefined {
  return watchdog?.pid;
}
