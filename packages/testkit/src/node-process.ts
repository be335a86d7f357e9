// Separate Node processes for tests that need one (a second generator, a crash mid-operation):
// TypeScript runs through tsx; every child is stopped by stopAll(), at exit, or by the watchdog.
import { type ChildProcess, type SpawnOptions, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { isAbsolute, resolve as resolvePath } from "node:path";
import { pathToFileURL } from "node:url";
import { forgetPid, killTree, type Tracked, track, untrack, watchPid } from "./cleanup";

/** Options of spawnNode(). */
export interface SpawnNodeOptions {
  /** Variables added to (and overriding) this process's environment. */
  env?: Record<string, string>;
  /** Working directory (default: this process's). */
  cwd?: string;
  /** stdio of the child (default: pipes for all three, so a test can read its output). */
  stdio?: SpawnOptions["stdio"];
  /** Extra flags for node itself, before the script (e.g. "--expose-gc"). */
  nodeArgs?: string[];
  /**
   * A command that runs node (e.g. `["unshare", "--pid", "--fork", "--kill-child"]`): the child is
   * then that command, with node and its arguments after it. Signals reach the wrapper, not node.
   */
  wrapper?: string[];
}

/** Options of runNode(). */
export interface RunNodeOptions extends Omit<SpawnNodeOptions, "stdio"> {
  /**
   * SIGKILL the child after this many ms; the result then has `timedOut: true` (default 60 000).
   */
  timeoutMs?: number;
  /** Text written to the child's stdin (which is then closed). */
  input?: string;
}

/** How a runNode() child ended, and everything it printed. */
export interface RunNodeResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** True when the child was killed because it ran longer than `timeoutMs`. */
  timedOut: boolean;
}

/** ms a child gets to exit after SIGTERM from stopAll() before it is SIGKILLed. */
const CHILD_GRACE_MS = 3000;

let tsxLoader: string | undefined;

/** file: URL of tsx's loader, resolved from here so the child's cwd does not matter. */
function tsxLoaderUrl(): string {
  tsxLoader ??= pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
  return tsxLoader;
}

function nodeCommand(script: string, args: string[], nodeArgs: string[]): string[] {
  const path = isAbsolute(script) ? script : resolvePath(script);
  const typescript = /\.[cm]?tsx?$/.test(path);
  return [...(typescript ? ["--import", tsxLoaderUrl()] : []), ...nodeArgs, path, ...args];
}

/**
 * Starts `script` (TypeScript through `node --import tsx`, or JavaScript) as a separate node
 * process and returns it at once. The child is tracked: stopAll(), this process exiting, or the
 * watchdog (if this process is SIGKILLed) stops it. Relative paths resolve against the cwd.
 */
export function spawnNode(
  script: string,
  args: string[] = [],
  options: SpawnNodeOptions = {},
): ChildProcess {
  const command = [process.execPath, ...nodeCommand(script, args, options.nodeArgs ?? [])];
  const [file, ...rest] = [...(options.wrapper ?? []), ...command];
  const child = spawn(file!, rest, {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: options.stdio ?? ["pipe", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    // A child that could not be spawned never exits.
    child.once("error", () => resolve());
  });
  const tracked: Tracked = {
    async dispose() {
      if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
      killTree(child.pid, "SIGTERM");
      const timer = setTimeout(() => killTree(child.pid!, "SIGKILL"), CHILD_GRACE_MS);
      await exited;
      clearTimeout(timer);
    },
    killNow() {
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
        killTree(child.pid, "SIGKILL");
      }
    },
  };
  track(tracked);
  child.once("spawn", () => watchPid(child.pid!));
  void exited.then(() => {
    untrack(tracked);
    if (child.pid !== undefined) forgetPid(child.pid);
  });
  return child;
}

/**
 * Runs `script` like spawnNode() and resolves when it exits, with its exit code or signal and
 * everything it printed. Never rejects for a failing script: check `code`.
 */
export function runNode(
  script: string,
  args: string[] = [],
  options: RunNodeOptions = {},
): Promise<RunNodeResult> {
  return new Promise((resolve, reject) => {
    const child = spawnNode(script, args, options);
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    child.stdin?.on("error", () => {
      // The child exited before reading its input; its exit status tells the story.
    });
    child.stdin?.end(options.input ?? "");
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) killTree(child.pid, "SIGKILL");
    }, options.timeoutMs ?? 60_000);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
}
