// One Leaf server as a real process (`leaf-server --config FILE`): started, SIGKILLed, SIGTERMed,
// paused and started again on the same port and data folder, optionally under a fake clock or as
// pid 1 of a PID namespace. The kit does not depend on @leaf/server: the caller names its CLI
// (the built dist/cli.js, or src/cli.ts, which runs through tsx). Started through spawnNode(), so
// stopAll(), the exit handlers and the watchdog stop it like every other child.
import type { ChildProcess } from "node:child_process";
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { TestkitError } from "./errors";
import type { FakeClock } from "./faketime";
import { httpGet, NoAnswer } from "./http-get";
import { spawnNode } from "./node-process";
import { waitUntilStopped } from "./process-state";

/** Options of a {@link LeafServerProcess}. */
export interface LeafServerProcessOptions {
  /** Path of the server's CLI: @leaf/server's `dist/cli.js`, or `src/cli.ts` (run through tsx). */
  cli: string;
  /** Short name in errors, file names and logs: "A", "B", "clock". */
  label: string;
  /**
   * Folder for the config file, the default data folder and the log (created at the first start).
   */
  dir: string;
  /** Port to listen on, kept across restarts (it is also the node's identity in the registries). */
  port: number;
  /**
   * Configuration as the JSON file holds it (nested keys). `dataDir`, `log.level` ("warn") and
   * `server.host`/`server.port` (127.0.0.1 and `port`) are set over it; other `server` keys are
   * kept.
   */
  config: Record<string, unknown>;
  /** Start the process under this clock. */
  clock?: FakeClock;
  /** Variables added to the process's environment (a pod's HOSTNAME, say). */
  env?: Record<string, string>;
  /**
   * How long a start may take before it counts as failed and the process is killed (default 45 s).
   */
  readyTimeoutMs?: number;
  /** How long stop() waits after SIGTERM before it sends SIGKILL (default 20 s). */
  stopTimeoutMs?: number;
  /** The data folder (default: `{dir}/{label}-data`); two processes may be given the same one. */
  dataDir?: string;
  /**
   * Run the server as pid 1 of a PID namespace of its own (`unshare --pid --fork --kill-child`,
   * needs root), as a container does: its pid means nothing to the other processes. SIGTERM cannot
   * be passed through unshare, so stop() is a SIGKILL of unshare, which SIGKILLs the server;
   * pause() is refused (it would stop unshare, not the server).
   */
  pidNamespace?: boolean;
}

/** How a process ended: exit code, or the signal that ended it. */
export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** How a start attempt ended. */
export type StartOutcome =
  | { started: true; ms: number }
  | {
      started: false;
      ms: number;
      /** Exit code, or null when the process was killed because it never became ready. */
      code: number | null;
      signal: NodeJS.Signals | null;
      /** The last lines the process printed. */
      output: string;
    };

const OUTPUT_TAIL_CHARS = 6000;
const READY_PROBE_INTERVAL_MS = 50;
const READY_PROBE_TIMEOUT_MS = 2000;
const DEFAULT_READY_TIMEOUT_MS = 45_000;
const DEFAULT_STOP_TIMEOUT_MS = 20_000;
const PID_NAMESPACE = ["unshare", "--pid", "--fork", "--kill-child"];

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function badOption(name: string, value: unknown, expected: string): TestkitError {
  return new TestkitError(
    "TESTKIT_BAD_OPTION",
    `LeafServerProcess option ${name}: ${JSON.stringify(value)}, expected ${expected}`,
  );
}

function checkOptions(options: LeafServerProcessOptions): void {
  if (typeof options !== "object" || options === null) {
    throw badOption("options", options, "an object with cli, label, dir, port and config");
  }
  for (const name of ["cli", "label", "dir"] as const) {
    if (typeof options[name] !== "string" || options[name].length === 0) {
      throw badOption(name, options[name], "a non-empty string");
    }
  }
  if (!Number.isInteger(options.port) || options.port < 1 || options.port > 65_535) {
    throw badOption("port", options.port, "a whole number from 1 to 65535");
  }
  if (typeof options.config !== "object" || options.config === null) {
    throw badOption("config", options.config, "the server's configuration as an object");
  }
  for (const name of ["readyTimeoutMs", "stopTimeoutMs"] as const) {
    const value = options[name];
    if (value !== undefined && (!Number.isInteger(value) || value <= 0)) {
      throw badOption(name, value, "a whole number of ms above 0");
    }
  }
}

/** A Leaf server process, restartable on its port and data folder. Construction does no I/O. */
/** How long an exited process's output may still be read before its exit is reported. */
const OUTPUT_DRAIN_MS = 1000;

/** Resolves once `child`'s stdout and stderr have ended, or after `ms`. */
function outputEnded(child: ChildProcess, ms: number): Promise<void> {
  const ended = (stream: Readable | null) =>
    new Promise<void>((resolve) => {
      if (!stream || stream.readableEnded || stream.destroyed) return resolve();
      stream.once("end", resolve);
      stream.once("close", resolve);
    });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return Promise.race([Promise.all([ended(child.stdout), ended(child.stderr)]), late]).then(() =>
    clearTimeout(timer),
  );
}

export class LeafServerProcess {
  readonly label: string;
  readonly port: number;
  /** `http://127.0.0.1:{port}`. */
  readonly url: string;
  /** Everything the process printed, over all its starts, with a line per start and exit. */
  readonly logFile: string;
  readonly configFile: string;
  /** The data folder of the process. */
  readonly dataDir: string;
  /** Number of times the process has been started (1 for the first run). */
  incarnation = 0;
  private child: ChildProcess | undefined;
  private exited: Promise<ProcessExit> | undefined;
  private outputTail = "";
  private paused = false;
  private configWritten = false;

  constructor(private readonly options: LeafServerProcessOptions) {
    checkOptions(options);
    this.label = options.label;
    this.port = options.port;
    this.url = `http://127.0.0.1:${options.port}`;
    this.logFile = join(options.dir, `${options.label}.log`);
    this.configFile = join(options.dir, `${options.label}.json`);
    this.dataDir = options.dataDir ?? join(options.dir, `${options.label}-data`);
  }

  /** The fake clock this process runs under, if any. */
  get clock(): FakeClock | undefined {
    return this.options.clock;
  }

  /** The last lines the latest start printed (the whole story is in {@link logFile}). */
  get output(): string {
    return this.outputTail;
  }

  /** Pid of the running process (for a PID namespace: of unshare); throws when not running. */
  get pid(): number {
    const pid = this.child?.pid;
    if (pid === undefined) {
      throw new TestkitError("TESTKIT_NOT_RUNNING", `Leaf server ${this.label} is not running`);
    }
    return pid;
  }

  /** Whether a process is running now (it may still be starting, or be paused). */
  get running(): boolean {
    return this.child !== undefined;
  }

  /**
   * SIGSTOP: the process stops where it is; connections stay open, requests queue in its sockets.
   * Returns once every thread of it has stopped (kill(2) only queues the signal).
   */
  pause(): void {
    if (this.options.pidNamespace) {
      throw new TestkitError(
        "TESTKIT_BAD_OPTION",
        `cannot pause Leaf server ${this.label}: it runs in a PID namespace (pidNamespace: true), ` +
          "and SIGSTOP would stop unshare, not the server",
      );
    }
    process.kill(this.pid, "SIGSTOP");
    this.paused = true;
    waitUntilStopped(this.pid, false, `Leaf server ${this.label}`);
  }

  /** SIGCONT: undoes pause(). */
  resume(): void {
    process.kill(this.pid, "SIGCONT");
    this.paused = false;
  }

  /**
   * Starts the process and waits until /health/ready answers 200; resolves with the ms it took.
   * Throws TESTKIT_START_FAILED, with the last lines it printed, when it exits first or is not
   * ready within `readyTimeoutMs`.
   */
  async start(): Promise<number> {
    const outcome = await this.tryStart();
    if (!outcome.started) {
      throw new TestkitError(
        "TESTKIT_START_FAILED",
        `Leaf server ${this.label} did not start (exit code ${outcome.code}, signal ` +
          `${outcome.signal}); log ${this.logFile}; last output:\n${outcome.output}`,
      );
    }
    return outcome.ms;
  }

  /**
   * Starts the process and waits until it is ready, it exits, or `readyTimeoutMs` passes (then it
   * is killed). Never throws for a server that refuses to start: the outcome says how it ended.
   */
  async tryStart(): Promise<StartOutcome> {
    if (this.child) {
      throw new TestkitError(
        "TESTKIT_BAD_OPTION",
        `Leaf server ${this.label} is already running (pid ${this.child.pid}): stop() or kill() it first`,
      );
    }
    this.writeConfig();
    const startedAt = performance.now();
    this.incarnation++;
    this.outputTail = "";
    appendFileSync(
      this.logFile,
      `\n==== ${new Date().toISOString()} start #${this.incarnation}` +
        `${this.clock ? ` (clock offset ${this.clock.offsetMs} ms)` : ""}\n`,
    );
    const child = spawnNode(this.options.cli, ["--config", this.configFile], {
      env: { ...(this.options.env ?? {}), ...(this.clock?.env() ?? {}) },
      stdio: ["ignore", "pipe", "pipe"],
      wrapper: this.options.pidNamespace ? PID_NAMESPACE : undefined,
    });
    this.child = child;
    const keep = (chunk: string) => {
      this.log(chunk);
      this.outputTail = (this.outputTail + chunk).slice(-OUTPUT_TAIL_CHARS);
    };
    child.stdout!.setEncoding("utf8").on("data", keep);
    child.stderr!.setEncoding("utf8").on("data", keep);
    const exited = new Promise<ProcessExit>((resolve) => {
      child.once("exit", (code, signal) => {
        if (this.child === child) {
          this.child = undefined;
          this.paused = false;
        }
        if (this.clock && child.pid !== undefined) this.clock.cleanUp(child.pid);
        // "exit" can come before the last output is read: what the process printed as it stopped
        // ("SIGTERM: closing") is kept first, waiting at most OUTPUT_DRAIN_MS (a worker process
        // that outlives its primary may hold the pipes open).
        void outputEnded(child, OUTPUT_DRAIN_MS).then(() => {
          try {
            this.log(`==== exited: code ${code}, signal ${signal}\n`);
          } finally {
            resolve({ code, signal });
          }
        });
      });
      child.once("error", (error) => {
        if (this.child === child) this.child = undefined;
        keep(`spawn error: ${error.message}\n`);
        resolve({ code: null, signal: null });
      });
    });
    this.exited = exited;
    const readyTimeoutMs = this.options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
    const deadline = startedAt + readyTimeoutMs;
    let gone: ProcessExit | undefined;
    void exited.then((result) => {
      gone = result;
    });
    while (performance.now() < deadline) {
      if (gone) {
        return { started: false, ms: performance.now() - startedAt, ...gone, output: this.output };
      }
      if (await this.ready()) return { started: true, ms: performance.now() - startedAt };
      await sleep(READY_PROBE_INTERVAL_MS);
    }
    const killed = await this.kill();
    return {
      started: false,
      ms: performance.now() - startedAt,
      code: killed.code,
      signal: killed.signal,
      output: `${this.output}\n(not ready within ${readyTimeoutMs} ms: killed)`,
    };
  }

  /** Whether /health/ready answers 200 now. */
  async ready(): Promise<boolean> {
    try {
      const answer = await httpGet(this.port, "/health/ready", {
        timeoutMs: READY_PROBE_TIMEOUT_MS,
      });
      return answer.status === 200;
    } catch (error) {
      if (error instanceof NoAnswer) return false;
      throw error;
    }
  }

  /** SIGKILL (a crash); resolves once the process is gone. */
  kill(): Promise<ProcessExit> {
    return this.signal("SIGKILL");
  }

  /**
   * SIGTERM (graceful: in-flight requests finish, the lease is released), SIGKILL after
   * `stopTimeoutMs`; resolves once the process is gone. A paused process is resumed first.
   */
  stop(): Promise<ProcessExit> {
    return this.end("SIGTERM");
  }

  /**
   * SIGINT (Ctrl-C: as stop(), without the drain), SIGKILL after `stopTimeoutMs`; resolves once
   * the process is gone. A paused process is resumed first.
   */
  interrupt(): Promise<ProcessExit> {
    return this.end("SIGINT");
  }

  private async end(signal: "SIGTERM" | "SIGINT"): Promise<ProcessExit> {
    const child = this.child;
    if (!child || !this.exited) return { code: null, signal: null };
    // A stopped process would see the signal only once resumed.
    if (this.paused) this.resume();
    const timer = setTimeout(
      () => child.kill("SIGKILL"),
      this.options.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS,
    );
    try {
      return await this.signal(this.options.pidNamespace ? "SIGKILL" : signal);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * GET `path` on this server as JSON; undefined when it does not answer 200 within `timeoutMs`.
   */
  async getJson<T>(
    path: string,
    timeoutMs = 3000,
    headers?: Record<string, string>,
  ): Promise<T | undefined> {
    const text = await this.getText(path, timeoutMs, headers);
    return text === undefined ? undefined : (JSON.parse(text) as T);
  }

  /**
   * GET `path` on this server as text; undefined when it does not answer 200 within `timeoutMs`.
   */
  async getText(
    path: string,
    timeoutMs = 3000,
    headers?: Record<string, string>,
  ): Promise<string | undefined> {
    if (!this.child) return undefined;
    try {
      const answer = await httpGet(this.port, path, { timeoutMs, headers });
      return answer.status === 200 ? answer.body : undefined;
    } catch (error) {
      if (error instanceof NoAnswer) return undefined;
      throw error;
    }
  }

  /** Writes the config file once (the same file serves every start). */
  private writeConfig(): void {
    if (this.configWritten) return;
    const { config } = this.options;
    mkdirSync(this.options.dir, { recursive: true });
    const full = {
      ...config,
      dataDir: this.dataDir,
      log: { level: "warn" },
      server: {
        ...(config.server as object | undefined),
        host: "127.0.0.1",
        port: this.port,
      },
    };
    writeFileSync(this.configFile, `${JSON.stringify(full, null, 2)}\n`);
    this.configWritten = true;
  }

  /**
   * Appends to {@link logFile}. Output that comes after a test removed the folder (a process
   * whose exit is still being drained, a worker that outlived its primary) is dropped: before,
   * the failed append was an unhandled rejection, and the exit was never reported.
   */
  private log(text: string): void {
    try {
      appendFileSync(this.logFile, text);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }

  private async signal(signal: NodeJS.Signals): Promise<ProcessExit> {
    const child = this.child;
    const exited = this.exited;
    if (!child || !exited) return { code: null, signal: null };
    child.kill(signal);
    return exited;
  }
}
