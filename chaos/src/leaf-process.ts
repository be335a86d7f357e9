// One Leaf server process (`leaf-server --config FILE`, the built CLI of @leaf/server) that the
// harness starts, SIGKILLs and starts again on the same port and data folder, optionally under a
// fake clock. Started through the test kit, so nothing outlives the run.
import { type ChildProcess, spawn } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { spawnNode } from "@leaf/testkit";
import type { FakeClock } from "./faketime";
import { httpGet, NoAnswer } from "./http-get";

/** The built CLI of @leaf/server. Throws, saying how to build it, when it is missing. */
export function serverCli(): string {
  const pkg = createRequire(import.meta.url).resolve("@leaf/server/package.json");
  const cli = join(dirname(pkg), "dist", "cli.js");
  if (!existsSync(cli)) {
    throw new Error(
      `[leaf] [chaos] the server is not built: ${cli} is missing; run \`pnpm --filter "@leaf/server..." build\` ` +
        "(or `pnpm test:chaos`, which builds it first)",
    );
  }
  return cli;
}

/** Modification time of the built CLI, for the report (which build was tested). */
export function serverBuildTime(): string {
  return statSync(serverCli()).mtime.toISOString();
}

/** Options of a {@link LeafProcess}. */
export interface LeafProcessOptions {
  /** Short name in reports and logs: "A", "B", "clock". */
  label: string;
  /** Folder for the config file, the data folder and the log. */
  dir: string;
  /** Port to listen on, kept across restarts (it is also the node's identity in the registries). */
  port: number;
  /** Configuration as a JSON file holds it (nested keys); port, data folder and log level are added. */
  config: Record<string, unknown>;
  /** Start the process under this clock. */
  clock?: FakeClock;
  /** How long a start may take before it counts as failed (default 45 s). */
  readyTimeoutMs?: number;
  /** The data folder (default: `{dir}/{label}-data`); two processes may be given the same one. */
  dataDir?: string;
  /**
   * Run the server as pid 1 of a PID namespace of its own (`unshare --pid --fork --kill-child`),
   * as a container does: its pid means nothing to the other processes. SIGTERM cannot be passed
   * through unshare, so stop() is a SIGKILL of unshare, which SIGKILLs the server.
   */
  pidNamespace?: boolean;
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

/** A Leaf server process. */
export class LeafProcess {
  readonly label: string;
  readonly port: number;
  readonly url: string;
  readonly logFile: string;
  readonly configFile: string;
  /** Number of times the process has been started (1 for the first run). */
  incarnation = 0;
  private child: ChildProcess | undefined;
  private exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | undefined;
  private output = "";
  private paused = false;

  constructor(private readonly options: LeafProcessOptions) {
    this.label = options.label;
    this.port = options.port;
    this.url = `http://127.0.0.1:${options.port}`;
    mkdirSync(options.dir, { recursive: true });
    this.logFile = join(options.dir, `${options.label}.log`);
    this.configFile = join(options.dir, `${options.label}.json`);
    const config = {
      ...options.config,
      dataDir: options.dataDir ?? join(options.dir, `${options.label}-data`),
      log: { level: "warn" },
      server: {
        ...(options.config.server as object | undefined),
        host: "127.0.0.1",
        port: options.port,
      },
    };
    writeFileSync(this.configFile, `${JSON.stringify(config, null, 2)}\n`);
  }

  /** The fake clock this process runs under, if any. */
  get clock(): FakeClock | undefined {
    return this.options.clock;
  }

  /** The data folder of the process. */
  get dataDir(): string {
    return this.options.dataDir ?? join(this.options.dir, `${this.label}-data`);
  }

  /** Pid of the running process (for a PID namespace: of unshare); throws when not running. */
  get pid(): number {
    const pid = this.child?.pid;
    if (pid === undefined) throw new Error(`[leaf] [chaos] server ${this.label} is not running`);
    return pid;
  }

  /** SIGSTOP: the process stops where it is; connections stay open, requests queue in its sockets. */
  pause(): void {
    if (this.options.pidNamespace)
      throw new Error("[leaf] [chaos] pause() of a server in a PID namespace would stop unshare");
    process.kill(this.pid, "SIGSTOP");
    this.paused = true;
  }

  /** SIGCONT: undoes pause(). */
  resume(): void {
    process.kill(this.pid, "SIGCONT");
    this.paused = false;
  }

  /** Whether a process is running now (it may still be starting). */
  get running(): boolean {
    return this.child !== undefined;
  }

  /** Starts the process and waits until /health/ready answers 200. Throws when it cannot start. */
  async start(): Promise<number> {
    const outcome = await this.tryStart();
    if (!outcome.started) {
      throw new Error(
        `[leaf] [chaos] server ${this.label} did not start (exit code ${outcome.code}, signal ` +
          `${outcome.signal}); log ${this.logFile}; last output:\n${outcome.output}`,
      );
    }
    return outcome.ms;
  }

  /**
   * Starts the process and waits until it is ready, it exits, or the ready timeout passes (then it
   * is killed). Never throws for a server that refuses to start: the outcome says how it ended.
   */
  async tryStart(): Promise<StartOutcome> {
    if (this.child) throw new Error(`[leaf] [chaos] server ${this.label} is already running`);
    const startedAt = performance.now();
    this.incarnation++;
    this.output = "";
    appendFileSync(
      this.logFile,
      `\n==== ${new Date().toISOString()} start #${this.incarnation}` +
        `${this.clock ? ` (clock offset ${this.clock.offsetMs} ms)` : ""}\n`,
    );
    const child = this.options.pidNamespace
      ? spawnInPidNamespace(serverCli(), ["--config", this.configFile], this.clock?.env() ?? {})
      : spawnNode(serverCli(), ["--config", this.configFile], {
          env: { ...(this.clock?.env() ?? {}) },
          stdio: ["ignore", "pipe", "pipe"],
        });
    this.child = child;
    const keep = (chunk: string) => {
      appendFileSync(this.logFile, chunk);
      this.output = (this.output + chunk).slice(-OUTPUT_TAIL_CHARS);
    };
    child.stdout!.setEncoding("utf8").on("data", keep);
    child.stderr!.setEncoding("utf8").on("data", keep);
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        if (this.child === child) {
          this.child = undefined;
          this.paused = false;
        }
        if (this.clock && child.pid !== undefined) this.clock.cleanUp(child.pid);
        appendFileSync(this.logFile, `==== exited: code ${code}, signal ${signal}\n`);
        resolve({ code, signal });
      });
      child.once("error", (error) => {
        if (this.child === child) this.child = undefined;
        keep(`spawn error: ${error.message}\n`);
        resolve({ code: null, signal: null });
      });
    });
    const exited = this.exited;
    const deadline = startedAt + (this.options.readyTimeoutMs ?? 45_000);
    let gone: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    void exited.then((result) => {
      gone = result;
    });
    while (performance.now() < deadline) {
      if (gone) {
        return { started: false, ms: performance.now() - startedAt, ...gone, output: this.output };
      }
      if (await this.ready()) return { started: true, ms: performance.now() - startedAt };
      await sleep(100);
    }
    const killed = await this.kill();
    return {
      started: false,
      ms: performance.now() - startedAt,
      code: killed.code,
      signal: killed.signal,
      output: `${this.output}\n(not ready within ${this.options.readyTimeoutMs ?? 45_000} ms: killed)`,
    };
  }

  /** Whether /health/ready answers 200 now. */
  async ready(): Promise<boolean> {
    try {
      return (await httpGet(this.port, "/health/ready", { timeoutMs: 2000 })).status === 200;
    } catch (error) {
      if (error instanceof NoAnswer) return false;
      throw error;
    }
  }

  /** SIGKILL (a crash); resolves once the process is gone. */
  async kill(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    return this.signal("SIGKILL");
  }

  /** SIGTERM (graceful: in-flight requests finish, the lease is released), SIGKILL after 20 s. */
  async stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    const child = this.child;
    if (!child || !this.exited) return { code: null, signal: null };
    // A stopped process would see SIGTERM only once resumed.
    if (this.paused) this.resume();
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    try {
      return await this.signal(this.options.pidNamespace ? "SIGKILL" : "SIGTERM");
    } finally {
      clearTimeout(timer);
    }
  }

  /** GET `path` on this server as JSON; undefined when it does not answer 200 within `timeoutMs`. */
  async getJson<T>(
    path: string,
    timeoutMs = 3000,
    headers?: Record<string, string>,
  ): Promise<T | undefined> {
    const text = await this.getText(path, timeoutMs, headers);
    return text === undefined ? undefined : (JSON.parse(text) as T);
  }

  /** GET `path` on this server as text; undefined when it does not answer 200 within `timeoutMs`. */
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

  private async signal(
    signal: NodeJS.Signals,
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    const child = this.child;
    const exited = this.exited;
    if (!child || !exited) return { code: null, signal: null };
    child.kill(signal);
    return exited;
  }
}

/** unshare children still running: killed when this process exits, whatever ends it. */
const namespaced = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of namespaced) child.kill("SIGKILL");
});

/**
 * Starts `node script args` as pid 1 of a new PID namespace. `--kill-child` makes the kernel SIGKILL
 * the server when unshare dies, so a SIGKILL of unshare is a SIGKILL of the server.
 */
function spawnInPidNamespace(
  script: string,
  args: string[],
  env: Record<string, string>,
): ChildProcess {
  const child = spawn(
    "unshare",
    ["--pid", "--fork", "--kill-child", process.execPath, script, ...args],
    { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  namespaced.add(child);
  child.once("exit", () => namespaced.delete(child));
  return child;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
