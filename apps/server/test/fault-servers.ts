// Real server processes for the fencing tests: started from the CLI's source (through tsx) with a
// JSON config file, optionally under libfaketime, stopped and resumed with SIGSTOP/SIGCONT, killed
// with SIGKILL; and a pipelining HTTP client that keeps requests queued in a server's socket, so
// that a resumed process finds them there before any of its timers runs.
import type { ChildProcess } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type PipelinedAnswer, PipelinedConnection, spawnNode } from "@leaf/testkit";

/** The CLI's source: the test kit runs .ts files with tsx. */
const CLI = new URL("../src/cli.ts", import.meta.url).pathname;

/** Where Debian and Ubuntu install libfaketime's thread-safe variant. */
const LIBFAKETIME = [
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
  "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
  "/usr/lib/faketime/libfaketimeMT.so.1",
].find((path) => existsSync(path));

/** The wall clock of one server process: real time + an offset read from a file at every reading. */
export class FakeClock {
  readonly file: string;

  constructor(dir: string) {
    if (!LIBFAKETIME) {
      throw new Error(
        "[leaf] [server test] libfaketime is not installed (apt-get install faketime)",
      );
    }
    this.file = join(dir, "faketime.offset");
    this.set(0);
  }

  /** Moves the clock to real time + offsetMs (negative: behind). */
  set(offsetMs: number): void {
    const sign = offsetMs < 0 ? "-" : "+";
    writeFileSync(this.file, `${sign}${(Math.abs(offsetMs) / 1000).toFixed(3)}\n`);
  }

  env(): Record<string, string> {
    return {
      LD_PRELOAD: LIBFAKETIME!,
      FAKETIME_TIMESTAMP_FILE: this.file,
      FAKETIME_NO_CACHE: "1",
      // Only the wall clock moves: timers and performance.now() stay real, as under an NTP step.
      FAKETIME_DONT_FAKE_MONOTONIC: "1",
      NO_FAKE_STAT: "1",
    };
  }
}

/** One server process, restartable on the same port and data folder. */
export class ServerProcess {
  readonly configFile: string;
  private child: ChildProcess | undefined;
  private exited: Promise<number | null> | undefined;
  output = "";

  constructor(
    readonly label: string,
    readonly dir: string,
    readonly port: number,
    config: Record<string, unknown>,
    private readonly clock?: FakeClock,
  ) {
    this.configFile = join(dir, `${label}.json`);
    const full = {
      ...config,
      dataDir: join(dir, `${label}-data`),
      log: { level: "warn" },
      server: {
        ...(config.server as object | undefined),
        host: "127.0.0.1",
        port,
        drainMs: 0,
      },
    };
    writeFileSync(this.configFile, JSON.stringify(full, null, 2));
  }

  get pid(): number {
    if (!this.child?.pid)
      throw new Error(`[leaf] [server test] server ${this.label} is not running`);
    return this.child.pid;
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  /**
   * Starts the process and waits until /health/ready answers 200. Resolves false when it exits
   * first (a refused start: the worker id is held elsewhere, the clock is behind).
   */
  async tryStart(timeoutMs = 60_000): Promise<boolean> {
    const child = spawnNode(CLI, ["--config", this.configFile], {
      env: { ...(this.clock?.env() ?? {}) },
    });
    this.child = child;
    const keep = (chunk: string) => {
      this.output = (this.output + chunk).slice(-20_000);
    };
    child.stdout!.setEncoding("utf8").on("data", keep);
    child.stderr!.setEncoding("utf8").on("data", keep);
    let gone = false;
    this.exited = new Promise((resolve) =>
      child.once("exit", (code) => {
        gone = true;
        if (this.child === child) this.child = undefined;
        resolve(code);
      }),
    );
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      if (gone) return false;
      if (await this.ready()) return true;
      await sleep(50);
    }
    await this.kill();
    throw new Error(
      `[leaf] [server test] server ${this.label} not ready in ${timeoutMs} ms:\n${this.output}`,
    );
  }

  async start(): Promise<void> {
    if (!(await this.tryStart())) {
      throw new Error(`[leaf] [server test] server ${this.label} exited at start:\n${this.output}`);
    }
  }

  async ready(): Promise<boolean> {
    try {
      const res = await fetch(`http://127.0.0.1:${this.port}/health/ready`, {
        signal: AbortSignal.timeout(2000),
      });
      await res.arrayBuffer();
      return res.status === 200;
    } catch {
      return false;
    }
  }

  /** Number of timestamp reports the worker has made (from /metrics); undefined when unreachable. */
  async reports(): Promise<number | undefined> {
    try {
      const res = await fetch(`http://127.0.0.1:${this.port}/metrics`, {
        signal: AbortSignal.timeout(2000),
      });
      const text = await res.text();
      const line = text
        .split("\n")
        .find((l) => l.startsWith('leaf_snowflake_lease_events_total{type="reported"}'));
      return line === undefined ? 0 : Number(line.split(" ").pop());
    } catch {
      return undefined;
    }
  }

  pause(): void {
    process.kill(this.pid, "SIGSTOP");
  }

  resume(): void {
    process.kill(this.pid, "SIGCONT");
  }

  async kill(): Promise<void> {
    const exited = this.exited;
    if (!this.child || !exited) return;
    this.child.kill("SIGKILL");
    await exited;
  }
}

/** One answer on a pipelined connection. */
export type Answer = PipelinedAnswer;

/** Every id of a batch answer (plain text, one per line) as a string; none for an error. */
export function idsOf(answer: Answer): string[] {
  if (answer.status !== 200) return [];
  return answer.body.split("\n").filter((line) => line.length > 0);
}

/** How many ids occur more than once, over all of `batches`. */
export function countDuplicates(batches: Iterable<string[]>): {
  total: number;
  duplicates: number;
} {
  const seen = new Set<string>();
  let total = 0;
  let duplicates = 0;
  for (const ids of batches) {
    for (const id of ids) {
      total++;
      if (seen.has(id)) duplicates++;
      else seen.add(id);
    }
  }
  return { total, duplicates };
}

/**
 * Keeps `connections` pipelined connections busy with `depth` batch requests each, collecting every
 * id answered, until stopped. Connections that fail (a killed server) are reopened.
 */
export class Load {
  readonly batches: string[][] = [];
  refused = 0;
  private running = true;
  private readonly loops: Array<Promise<void>> = [];

  constructor(
    private readonly port: number,
    private readonly path: string,
    connections = 4,
    private readonly depth = 4,
  ) {
    for (let i = 0; i < connections; i++) this.loops.push(this.loop());
  }

  private async loop(): Promise<void> {
    while (this.running) {
      let connection: PipelinedConnection;
      try {
        connection = await PipelinedConnection.open(this.port);
      } catch {
        await sleep(20);
        continue;
      }
      try {
        while (this.running) {
          for (const answer of await connection.get(this.path, this.depth)) {
            if (answer.status === 200) this.batches.push(idsOf(answer));
            else this.refused++;
          }
        }
      } catch {
        await sleep(20);
      } finally {
        connection.close();
      }
    }
  }

  /** Ids collected so far. */
  get ids(): number {
    let n = 0;
    for (const b of this.batches) n += b.length;
    return n;
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `condition` every 20 ms until it holds; throws after `timeoutMs` saying what was awaited. */
export async function until(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline)
      throw new Error(`[leaf] [server test] timed out waiting for ${what}`);
    await sleep(20);
  }
}
