// One private server process: spawn it on a port, wait until it really answers, and break it on
// demand. Knows nothing about any one server (MariaDB, PostgreSQL, Redis, ...); each starter
// passes a ServerSpec.
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, statSync } from "node:fs";
import { forgetPid, killDescendants, killTree, watchPid } from "./cleanup";
import { TestkitError } from "./errors";
import { freePort } from "./ports";
import { waitUntilExited, waitUntilStopped } from "./process-state";
import type { ServiceKind } from "./types";

/** How to run one kind of server. */
export interface ServerSpec {
  kind: ServiceKind;
  /** The instance's temp folder (the server's cwd). */
  dir: string;
  /** Where the server's stdout and stderr go. */
  logFile: string;
  /** Executable and arguments for a server on `port`. */
  command(port: number): { file: string; args: string[] };
  /** Called before every spawn (writes config files that name the port). */
  prepare?(port: number): Promise<void>;
  /** Resolves true once the server on `port` answers and is the one we started (pid `pid`). */
  probe(port: number, pid: number): Promise<boolean>;
  /** ms to wait for `probe` after a spawn. */
  readyTimeoutMs: number;
  /** ms that stop() waits after SIGTERM before it sends SIGKILL. */
  stopTimeoutMs: number;
  /**
   * Which processes make up the server (default "group": the process group it leads).
   * "descendants": every process descended from it, for servers whose children leave its group
   * (PostgreSQL's backends each call setsid).
   */
  processes?: "group" | "descendants";
  /**
   * Signal of a graceful stop (default SIGTERM), sent to the server's process group (with
   * `processes` "descendants", the server alone: it stops its children itself).
   */
  stopSignal?: NodeJS.Signals;
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const PROBE_INTERVAL_MS = 25;
const LOG_TAIL_LINES = 25;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The last lines a server wrote after byte `from` of its log, for error messages. */
export function logTail(logFile: string, from = 0): string {
  try {
    const text = readFileSync(logFile, "utf8").slice(from);
    return text.trimEnd().split("\n").slice(-LOG_TAIL_LINES).join("\n");
  } catch {
    return "(no log)";
  }
}

function logSize(logFile: string): number {
  return existsSync(logFile) ? statSync(logFile).size : 0;
}

/** A server process on a fixed port that can be started again after it stops. */
export class ServerProcess {
  private child: ChildProcess | undefined;
  private exited: Promise<Exit> | undefined;
  private paused = false;
  private portValue = 0;
  private starting: Promise<void> | undefined;

  constructor(private readonly spec: ServerSpec) {}

  /** The port, fixed at the first start. */
  get port(): number {
    return this.portValue;
  }

  /** Pid of the running server, undefined while stopped. */
  get pid(): number | undefined {
    return this.running ? this.child?.pid : undefined;
  }

  /** Whether the process is alive (also while paused). */
  get running(): boolean {
    return (
      this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null
    );
  }

  /**
   * First start: picks a free port, and another one if a different process takes it first (up to
   * 5 times).
   */
  async startOnFreePort(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      this.portValue = await freePort();
      try {
        await this.start();
        return;
      } catch (error) {
        const portTaken = error instanceof PortTakenError;
        if (!portTaken || attempt >= 5) throw portTaken ? error.failure : error;
      }
    }
  }

  /** Starts the server on its port unless it runs; resolves when it answers. */
  start(): Promise<void> {
    // Two overlapping calls must not spawn two servers on one port and folder.
    this.starting ??= this.spawnAndWait().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private async spawnAndWait(): Promise<void> {
    if (this.running) return;
    const { spec } = this;
    await spec.prepare?.(this.portValue);
    const { file, args } = spec.command(this.portValue);
    const logStart = logSize(spec.logFile);
    const log = openSync(spec.logFile, "a");
    let child: ChildProcess;
    try {
      // Detached: Ctrl-C in the terminal reaches the test process, which stops its servers in
      // order, instead of every server at once; the server's group is also what kill() signals.
      child = spawn(file, args, { cwd: spec.dir, detached: true, stdio: ["ignore", log, log] });
    } finally {
      closeSync(log);
    }
    const spawned = new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", reject);
    });
    this.exited = new Promise<Exit>((resolve) => {
      child.once("exit", (code, signal) => {
        if (child.pid !== undefined) forgetPid(child.pid);
        resolve({ code, signal });
      });
    });
    // A failed spawn emits "error" and never "exit".
    child.once("error", () => {});
    this.child = child;
    this.paused = false;
    try {
      await spawned;
    } catch (error) {
      this.child = undefined;
      throw new TestkitError("TESTKIT_START_FAILED", `could not run ${file}: ${String(error)}`, {
        cause: error,
      });
    }
    const pid = child.pid!;
    watchPid(pid);
    // Unref'd, a forgotten server does not keep a script alive; the exit handler then kills it.
    child.unref();
    await this.waitUntilReady(child, pid, logStart);
  }

  private async waitUntilReady(child: ChildProcess, pid: number, logStart: number): Promise<void> {
    const { spec } = this;
    const deadline = Date.now() + spec.readyTimeoutMs;
    const exited = this.exited!;
    let exit: Exit | undefined;
    void exited.then((value) => {
      exit = value;
    });
    for (;;) {
      if (exit) {
        const tail = logTail(spec.logFile, logStart);
        const failure = new TestkitError(
          "TESTKIT_START_FAILED",
          `${spec.kind} server (${spec.command(this.portValue).file}) exited with ${
            exit.signal ?? `code ${exit.code}`
          } before it answered on 127.0.0.1:${this.portValue}. Last lines of ${spec.logFile}:\n${tail}`,
        );
        if (/address already in use/i.test(tail)) throw new PortTakenError(failure);
        throw failure;
      }
      if (await spec.probe(this.portValue, pid).catch(() => false)) return;
      if (Date.now() > deadline) {
        this.signal(pid, "SIGKILL");
        await this.waitForExit(child);
        throw new TestkitError(
          "TESTKIT_START_FAILED",
          `${spec.kind} server did not answer on 127.0.0.1:${this.portValue} within ${
            spec.readyTimeoutMs
          } ms (readyTimeoutMs). Last lines of ${spec.logFile}:\n${logTail(spec.logFile, logStart)}`,
        );
      }
      await sleep(PROBE_INTERVAL_MS);
    }
  }

  private async waitForExit(child: ChildProcess): Promise<void> {
    // A pending promise does not keep Node alive; the child handle does while we wait for it.
    child.ref();
    try {
      await this.exited;
    } finally {
      child.unref();
    }
  }

  /** SIGKILL; resolves once the process has exited. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const others = this.signal(child.pid!, "SIGKILL");
    await this.waitForExit(child);
    // Processes that left the server's group are no children of ours: no exit event tells.
    await waitUntilExited(others, `the ${this.spec.kind} server on 127.0.0.1:${this.portValue}`);
  }

  /** SIGTERM, then SIGKILL after `stopTimeoutMs`; resolves once the process has exited. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const stopSignal = this.spec.stopSignal ?? "SIGTERM";
    killTree(child.pid!, stopSignal);
    // A stopped process keeps the signal pending until it runs again.
    if (this.paused) this.signal(child.pid!, "SIGCONT");
    this.paused = false;
    const timer = setTimeout(() => this.signal(child.pid!, "SIGKILL"), this.spec.stopTimeoutMs);
    try {
      await this.waitForExit(child);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * SIGSTOP: the server keeps its connections but answers nothing until resume(). Returns once
   * every thread of it has stopped (kill(2) only queues the signal).
   */
  pause(): void {
    this.requireRunning("pause");
    this.signal(this.child!.pid!, "SIGSTOP");
    this.paused = true;
    waitUntilStopped(
      this.child!.pid!,
      this.spec.processes === "descendants" ? "descendants" : true,
      `the ${this.spec.kind} server on 127.0.0.1:${this.portValue}`,
    );
  }

  /** SIGCONT after pause(). */
  resume(): void {
    this.requireRunning("resume");
    this.signal(this.child!.pid!, "SIGCONT");
    this.paused = false;
  }

  /** Synchronous SIGKILL for exit handlers. */
  killNow(): void {
    if (this.child?.pid !== undefined && this.running) this.signal(this.child.pid, "SIGKILL");
  }

  /**
   * Sends `signal` to every process of the server; returns the processes outside its group that
   * were signalled (with `processes` "descendants").
   */
  private signal(pid: number, signal: NodeJS.Signals): number[] {
    if (this.spec.processes === "descendants") return killDescendants(pid, signal);
    killTree(pid, signal);
    return [];
  }

  private requireRunning(action: string): void {
    if (!this.running) {
      throw new TestkitError(
        "TESTKIT_NOT_RUNNING",
        `cannot ${action} the ${this.spec.kind} server on 127.0.0.1:${this.portValue}: it is not running (call start() first)`,
      );
    }
  }
}

/** Start failure caused by another process binding the port first. */
class PortTakenError extends Error {
  constructor(readonly failure: TestkitError) {
    super(failure.message);
  }
}
