// Real server processes for the fencing tests: the test kit's LeafServerProcess running the CLI
// from source (through tsx), optionally under libfaketime; and a pipelining HTTP client that keeps
// requests queued in a server's socket, so that a resumed process finds them there before any of
// its timers runs.
import {
  type FakeClock,
  LeafServerProcess,
  type PipelinedAnswer,
  PipelinedConnection,
} from "@leaf/testkit";

/** The CLI's source: the test kit runs .ts files with tsx. */
const CLI = new URL("../src/cli.ts", import.meta.url).pathname;

/**
 * One server process, restartable on the same port and data folder (`{dir}/{label}-data`): the
 * CLI from source with `config`, no drain on SIGTERM, 60 s to become ready; `stopTimeoutMs`: how
 * long stop() waits after SIGTERM before SIGKILL (the test kit's default: 20 s).
 */
export function serverProcess(
  label: string,
  dir: string,
  port: number,
  config: Record<string, unknown>,
  clock?: FakeClock,
  stopTimeoutMs?: number,
): LeafServerProcess {
  return new LeafServerProcess({
    cli: CLI,
    label,
    dir,
    port,
    config: { ...config, server: { ...(config.server as object | undefined), drainMs: 0 } },
    clock,
    readyTimeoutMs: 60_000,
    ...(stopTimeoutMs !== undefined ? { stopTimeoutMs } : {}),
  });
}

/** Number of timestamp reports the worker has made (from /metrics); undefined when unreachable. */
export async function reportsOf(server: LeafServerProcess): Promise<number | undefined> {
  const text = await server.getText("/metrics", 2000);
  if (text === undefined) return undefined;
  const line = text
    .split("\n")
    .find((l) => l.startsWith('leaf_snowflake_lease_events_total{type="reported"}'));
  return line === undefined ? 0 : Number(line.split(" ").pop());
}

/** One answer on a pipelined connection. */
export type Answer = PipelinedAnswer;

/** Every id of a batch answer (plain text, one per line) as a string; none for an error. */
export function idsOf(answer: Answer): string[] {
  if (answer.status !== 200) return [];
  return answer.body.split("\n").filter((line) => line.length > 0);
}

/**
 * Keeps `connections` pipelined connections busy with `depth` batch requests each, collecting every
 * id answered, until stopped. Connections that fail (a killed server) are reopened.
 */
export class Load {
  readonly batches: string[][] = [];
  refused = 0;
  /** The refusals' answers (status and the start of the body), with how many times each came. */
  readonly refusals = new Map<string, number>();
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
            else {
              this.refused++;
              const what = `${answer.status} ${answer.body.slice(0, 300)}`;
              this.refusals.set(what, (this.refusals.get(what) ?? 0) + 1);
            }
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
