// Shared by the tests of servers with several worker processes (server.workers): such a server as a
// real process (the CLI from source, through tsx), its workers as the monitor lists them, and load
// on keep-alive connections that keeps every id it receives.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { Agent } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  freePort,
  httpGet,
  IdLog,
  keepAliveAgent,
  LeafServerProcess,
  NoAnswer,
} from "@leaf/testkit";
import { CLI } from "./cli-process";

/** A worker process as `/api/v1/monitor` lists it. */
export interface ListedWorker {
  slot: number;
  pid: number | undefined;
  state: string;
  restarts: number;
  missing?: string;
  summary: {
    ready: boolean;
    workerId: number | null;
    node: string | null;
    tags: number | null;
    ranges: number | null;
  } | null;
}

const dirs: string[] = [];

/** Removes the folders of every server {@link workersServer} made (call once they stopped). */
export function removeServerFolders(): void {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** A server of `workers` worker processes on a free port, its data in a new folder (not started). */
export async function workersServer(
  label: string,
  config: Record<string, unknown>,
  options: {
    workers?: number;
    dir?: string;
    port?: number;
    dataDir?: string;
    env?: Record<string, string>;
  } = {},
): Promise<LeafServerProcess> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "leaf-workers-"));
  if (options.dir === undefined) dirs.push(dir);
  const server = (config.server ?? {}) as Record<string, unknown>;
  return new LeafServerProcess({
    cli: CLI,
    label,
    dir,
    port: options.port ?? (await freePort()),
    dataDir: options.dataDir,
    env: options.env,
    config: { ...config, server: { drainMs: 0, ...server, workers: options.workers ?? 2 } },
    readyTimeoutMs: 90_000,
  });
}

/** The server's worker processes, as its monitor lists them (any worker may answer). */
export async function listWorkers(server: LeafServerProcess): Promise<ListedWorker[]> {
  const state = await server.getJson<{ workers: { list: ListedWorker[] } | null }>(
    "/api/v1/monitor",
    5000,
  );
  if (!state?.workers) throw new Error(`server ${server.label} did not list its workers`);
  return state.workers.list;
}

/** Whether process `pid` still exists (a zombie counts as gone: it issues nothing). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
}

/** A path to ask, its ids kept under `space`. */
export interface Ask {
  space: string;
  path: string;
}

/** One loop of a load: its asks in turn, again and again (one ask, or several). */
export type LoadLoop = Ask | Ask[];

/**
 * Keep-alive load on one server: `loops` concurrent loops over `connections` sockets (node:cluster
 * hands connections to the workers in turn, so several sockets reach every worker). Every id
 * answered is kept per space; every answer without ids is counted by its code.
 */
export class IdLoad {
  readonly ids = new Map<string, IdLog>();
  readonly codes = new Map<string, number>();
  answers = 0;
  private running = true;
  private readonly agent: Agent;
  private readonly done: Promise<void>;

  constructor(
    readonly port: number,
    loops: LoadLoop[],
    connections = 8,
  ) {
    this.agent = keepAliveAgent(connections);
    // One loop after the other: node:cluster hands connections that arrive in a burst to whichever
    // worker acknowledges first, and keep-alive connections stay where they landed.
    this.done = Promise.all(
      loops.map(async (loop, i) => {
        await new Promise((resolve) => setTimeout(resolve, i * 30));
        await this.loop(loop);
      }),
    ).then(() => undefined);
  }

  /** Ids kept so far, all spaces together. */
  get count(): number {
    let n = 0;
    for (const log of this.ids.values()) n += log.count;
    return n;
  }

  /** Stops asking, waits for the answers in flight. */
  async stop(): Promise<void> {
    this.running = false;
    await this.done;
    this.agent.destroy();
  }

  /** Resolves once `n` more ids than now were kept. */
  async more(n: number, timeoutMs = 60_000): Promise<void> {
    const target = this.count + n;
    const deadline = Date.now() + timeoutMs;
    while (this.count < target) {
      if (Date.now() > deadline) {
        throw new Error(
          `load: ${this.count} of ${target} ids after ${timeoutMs} ms; codes ${JSON.stringify(Object.fromEntries(this.codes))}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  private async loop(loop: LoadLoop): Promise<void> {
    const asks = Array.isArray(loop) ? loop : [loop];
    for (let turn = 0; this.running; turn++) {
      const { space, path } = asks[turn % asks.length]!;
      let log = this.ids.get(space);
      if (!log) {
        log = new IdLog();
        this.ids.set(space, log);
      }
      try {
        const answer = await httpGet(this.port, path, { agent: this.agent, timeoutMs: 5000 });
        this.answers++;
        if (answer.status === 200) {
          for (const line of answer.body.split("\n")) if (line !== "") log.push(BigInt(line));
        } else {
          const code = /^([A-Z_]+):/m.exec(answer.body)?.[1] ?? `HTTP ${answer.status}`;
          this.note(code);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } catch (error) {
        this.note(error instanceof NoAnswer ? error.code : String(error));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
  }

  private note(code: string): void {
    this.codes.set(code, (this.codes.get(code) ?? 0) + 1);
  }
}

/** The worker id of a snowflake id of Leaf's layout (41 + 10 + 12 bits). */
export function leafWorkerId(id: bigint): number {
  return Number((id >> 12n) & 1023n);
}
