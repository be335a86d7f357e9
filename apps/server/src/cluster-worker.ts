// One worker process of a server with several (server.workers): it is started by the primary
// (cluster-primary.ts), serves the shared port with its own snowflake worker id and its own segment
// ranges, and answers for the whole server through the primary: readiness (ready only when every
// worker is), /metrics (every worker's, aggregated), the monitor's list of workers, and admin
// changes (every worker re-reads its tags before the change is answered). It stops issuing ids the
// moment its primary is gone.
import { writeSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { isLeafError } from "@leaf/core";
import { acquireLockFileWaiting, type HeldLockFile } from "@leaf/core/adapter";
import type { SegmentStore } from "@leaf/segment";
import { AggregatorRegistry } from "prom-client";
import { requestLogFields } from "./access-tokens";
import {
  type FromPrimary,
  type FromWorker,
  type GatherKind,
  isLeafMessage,
  receivedError,
  type StopStep,
  type StoreOp,
  type WorkerAnswer,
} from "./cluster-messages";
import type { ServerConfig } from "./config";
import { configSummary } from "./config-summary";
import type { AppContext } from "./id-sources";
import { RemoteSegmentStore } from "./ipc-store";
import type { MetricJson } from "./metrics-carry";
import { type Check, isReady, readiness } from "./readiness";
import { type LeafServer, startServer } from "./server";

/** How long the primary waits for each worker's answer to a gather, and the requester for it. */
const GATHER_WAIT_MS = 1000;
const METRICS_WAIT_MS = 2000;
/** Longest wait at a stop step for the siblings (they normally arrive within milliseconds). */
const STEP_WAIT_MS = 2000;
/**
 * A lock of another PID namespace (a previous container) counts as stale once untouched this long.
 */
const SLOT_LOCK_STALE_MS = 10_000;

/** What a worker process tells about itself on the monitor page. */
export interface WorkerSummary {
  state: AppContext["state"];
  ready: boolean;
  /** The snowflake worker id it holds, null without one. */
  workerId: number | null;
  /** Its node in the registry, `ip~wK:port`, null without snowflake mode. */
  node: string | null;
  /** Segment tags it serves, null without segment mode. */
  tags: number | null;
  /** Segment ranges it took from the store since it started, null without segment mode. */
  ranges: number | null;
  idsPerSecond: number;
  requestsPerSecond: number;
}

/** One high-water mark of a worker: tag, the end of its highest range, the highest max id seen. */
export type HighWaterRow = [tag: string, highWater: string, seen: string | null];

/** The workers of a server, as `/api/v1/monitor` shows them. */
export interface WorkersView {
  count: number;
  /** The worker process that answered this request. */
  answeredBy: number;
  /** The server is stopping (SIGTERM or SIGINT reached the primary). */
  stopping: boolean;
  list: Array<Omit<WorkerAnswer, "value"> & { summary: WorkerSummary | null }>;
}

/** This worker's place among the server's workers, and its channel to the primary. */
export class WorkerLink {
  private nextId = 1;
  private readonly pending = new Map<number, (message: FromPrimary) => void>();
  private readonly steps = new Map<StopStep, () => void>();
  private ctx: AppContext | undefined;

  constructor(
    /** 1 .. count; the same for the process that replaces this one. */
    readonly slot: number,
    readonly count: number,
    private readonly send: (message: FromWorker) => void,
  ) {}

  /** Lets the collects of the primary read this worker's server. */
  attach(ctx: AppContext): void {
    this.ctx = ctx;
  }

  /**
   * The primary's store (the embedded store's folder is the primary's), seen through the channel.
   */
  remoteStore(kind: string): SegmentStore {
    return new RemoteSegmentStore(kind, (op, args) => this.storeCall(op, args));
  }

  /**
   * Readiness of the whole server: this worker's checks, each ready only when every worker's is.
   */
  async readiness(): Promise<{
    ready: boolean;
    checks: Record<string, Check>;
    workers: Array<{ slot: number; pid: number | undefined; ready: boolean; detail: string }>;
  }> {
    const own = readiness(this.ctx!);
    let gathered: Awaited<ReturnType<WorkerLink["gather"]>>;
    try {
      gathered = await this.gather("ready", GATHER_WAIT_MS);
    } catch (error) {
      const detail = `the primary process did not answer: ${(error as Error).message}`;
      return {
        ready: false,
        checks: mapChecks(own, (check) => ({ ...check, ready: false, detail })),
        workers: [],
      };
    }
    const workers = gathered.answers.map((answer) => {
      const checks = answer.value as Record<string, Check> | undefined;
      const notReady = Object.entries(checks ?? {}).filter(([, c]) => !c.ready);
      return {
        slot: answer.slot,
        pid: answer.pid,
        ready: checks !== undefined && notReady.length === 0 && !gathered.stopping,
        detail:
          checks === undefined
            ? (answer.missing ?? answer.state)
            : notReady.length > 0
              ? notReady.map(([mode, c]) => `${mode}: ${c.detail}`).join("; ")
              : gathered.stopping
                ? "the server is stopping"
                : "ready",
      };
    });
    const checks = mapChecks(own, (check, mode) => {
      const others = gathered.answers
        .filter((a) => a.slot !== this.slot)
        .flatMap((a) => {
          const theirs = (a.value as Record<string, Check> | undefined)?.[mode];
          if (theirs?.ready) return [];
          return [`worker ${a.slot}: ${theirs?.detail ?? a.missing ?? a.state}`];
        });
      const ready = check.ready && others.length === 0 && !gathered.stopping;
      const detail = [
        check.detail,
        ...(gathered.stopping ? ["the server is stopping"] : []),
        ...others,
      ].join("; ");
      return { ...check, ready, detail };
    });
    return { ready: workers.every((w) => w.ready), checks, workers };
  }

  /**
   * `/metrics` of the whole server: every worker's metrics and the primary's (its process and the
   * worker restarts), counters and histograms summed (with what ended processes and workers that
   * did not answer now had counted: the sum never goes down), gauges kept apart by a `worker`
   * label.
   */
  async metricsText(): Promise<{ text: string; contentType: string }> {
    const gathered = await this.gather("metrics", METRICS_WAIT_MS);
    const parts: MetricJson[][] = [];
    for (const answer of gathered.answers) {
      if (answer.value === undefined) continue;
      const worker = answer.slot === 0 ? "primary" : String(answer.slot);
      parts.push(
        (answer.value as MetricJson[]).map((metric) =>
          // A gauge is one process's state (its worker id, its memory): kept per worker; a label
          // `worker` of its own (the primary's per-worker gauges) is kept as it is.
          String(metric.type) === "gauge"
            ? {
                ...metric,
                values: metric.values.map((v) => ({ ...v, labels: { worker, ...v.labels } })),
              }
            : metric,
        ),
      );
    }
    // Counters of ended processes and of workers that did not answer now: the sum never goes down.
    for (const part of gathered.carried) parts.push(part as MetricJson[]);
    const registry = AggregatorRegistry.aggregate(parts);
    return { text: await registry.metrics(), contentType: registry.contentType };
  }

  /** The server's workers for the monitor page. */
  async workers(): Promise<WorkersView> {
    const gathered = await this.gather("monitor", GATHER_WAIT_MS);
    return {
      count: this.count,
      answeredBy: this.slot,
      stopping: gathered.stopping,
      list: gathered.answers
        .filter((a) => a.slot > 0)
        .map(({ value, ...rest }) => ({ ...rest, summary: (value as WorkerSummary) ?? null })),
    };
  }

  /**
   * After an admin change (a tag created, deleted, its step changed): every worker re-reads its
   * tags now, and this resolves once they did (a worker that does not answer in time does it when
   * it reads the request; its periodic refresh would too). Never throws: the change is made.
   */
  async refreshAll(): Promise<void> {
    await this.gather("refresh", GATHER_WAIT_MS).catch(() => undefined);
  }

  /** Every worker's high-water marks (`values`: tag, mark, highest max id seen), or why not. */
  async highWaterMarks(): Promise<
    Array<{ slot: number; marks?: HighWaterRow[]; missing?: string }>
  > {
    const gathered = await this.gather("high-water", GATHER_WAIT_MS);
    return gathered.answers.map((a) => ({
      slot: a.slot,
      ...(a.value !== undefined ? { marks: a.value as HighWaterRow[] } : { missing: a.missing }),
    }));
  }

  /** Forgets `tag`'s high-water mark in every worker; each one's answer, or why there is none. */
  async forgetHighWater(
    tag: string,
  ): Promise<
    Array<{ slot: number; forgotten?: string | null; refused?: boolean; missing?: string }>
  > {
    const gathered = await this.gather("forget-high-water", GATHER_WAIT_MS, tag);
    return gathered.answers.map((a) => ({
      slot: a.slot,
      ...(a.value !== undefined
        ? (a.value as { forgotten: string | null; refused: boolean })
        : { missing: a.missing }),
    }));
  }

  /**
   * A step of a stop that every worker passes together (see {@link StopStep}): resolves once the
   * primary says every stopping worker reached it, or after {@link STEP_WAIT_MS} (a paused sibling,
   * a primary gone). When only this worker stops (SIGTERM to it alone), the primary lets it pass
   * at once: its siblings keep serving the port.
   */
  async passStep(step: StopStep): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(finish, STEP_WAIT_MS);
      timer.unref();
      function finish() {
        clearTimeout(timer);
        resolve();
      }
      this.steps.set(step, finish);
      if (!this.trySend({ leaf: "step", step })) finish();
    });
    this.steps.delete(step);
  }

  /** Dispatches a message of the primary. */
  handle(message: FromPrimary): void {
    if (message.leaf === "gathered" || message.leaf === "store-result") {
      const resolve = this.pending.get(message.id);
      this.pending.delete(message.id);
      resolve?.(message);
    } else if (message.leaf === "step") {
      this.steps.get(message.step)?.();
    } else if (message.leaf === "collect") {
      void this.collect(message.what, message.arg).then(
        (value) => this.trySend({ leaf: "collected", id: message.id, value }),
        (error: unknown) =>
          this.trySend({ leaf: "collected", id: message.id, error: (error as Error).message }),
      );
    }
  }

  /** Fails every call still waiting for the primary (it is gone). */
  abandon(reason: string): void {
    for (const resolve of this.pending.values()) {
      resolve({ leaf: "store-result", id: 0, error: { message: reason } });
    }
    this.pending.clear();
  }

  private async collect(what: GatherKind, arg: string | undefined): Promise<unknown> {
    const ctx = this.ctx;
    if (ctx === undefined) throw new Error("still starting");
    switch (what) {
      case "ready":
        return readiness(ctx);
      case "metrics":
        return ctx.metrics.registry.getMetricsAsJSON();
      case "monitor":
        return summary(ctx);
      case "refresh":
        await ctx.services?.segment?.generator.refresh();
        return true;
      case "high-water": {
        const generator = ctx.services?.segment?.generator;
        if (generator === undefined) return [];
        const seen = generator.observedMaxIds();
        return [...generator.highWaterMarks()].map(
          ([tag, end]): HighWaterRow => [tag, end.toString(), seen.get(tag)?.toString() ?? null],
        );
      }
      case "forget-high-water": {
        const generator = ctx.services?.segment?.generator;
        if (generator === undefined || arg === undefined)
          return { forgotten: null, refused: false };
        const forgotten = await generator.forgetHighWater(arg);
        return {
          forgotten: forgotten === undefined ? null : forgotten.toString(),
          refused: generator.snapshot(arg)?.refused != null,
        };
      }
    }
  }

  private async gather(
    what: GatherKind,
    waitMs: number,
    arg?: string,
  ): Promise<{ stopping: boolean; answers: WorkerAnswer[]; carried: unknown[][] }> {
    const answer = await this.request(
      { leaf: "gather", id: this.nextId++, what, arg },
      waitMs + 1000,
    );
    if (answer.leaf !== "gathered") throw receivedError(answer.error ?? { message: "no answer" });
    return { stopping: answer.stopping, answers: answer.answers, carried: answer.carried ?? [] };
  }

  private async storeCall(op: StoreOp, args: unknown[]): Promise<unknown> {
    const answer = await this.request({ leaf: "store", id: this.nextId++, op, args });
    if (answer.leaf !== "store-result") throw new Error("unexpected answer");
    if (answer.error !== undefined) throw receivedError(answer.error);
    return answer.value;
  }

  private request(
    message: Extract<FromWorker, { id: number }>,
    timeoutMs?: number,
  ): Promise<Extract<FromPrimary, { leaf: "gathered" | "store-result" }>> {
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      this.pending.set(message.id, (answer) => {
        if (timer) clearTimeout(timer);
        resolve(answer as Extract<FromPrimary, { leaf: "gathered" | "store-result" }>);
      });
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.pending.delete(message.id);
          reject(new Error(`no answer from the primary process within ${timeoutMs} ms`));
        }, timeoutMs);
        timer.unref();
      }
      if (!this.trySend(message)) {
        this.pending.delete(message.id);
        if (timer) clearTimeout(timer);
        reject(new Error("the channel to the primary process is closed"));
      }
    });
  }

  private trySend(message: FromWorker): boolean {
    try {
      this.send(message);
      return true;
    } catch {
      return false;
    }
  }
}

/** What this worker tells the monitor about itself. */
function summary(ctx: AppContext): WorkerSummary {
  const activity = ctx.metrics.activity.view();
  const snowflake = ctx.services?.snowflake;
  return {
    state: ctx.state,
    ready: isReady(ctx),
    workerId: snowflake?.worker.lease?.workerId ?? null,
    node: snowflake ? `${snowflake.node.ip}:${snowflake.node.port}` : null,
    tags: ctx.services?.segment?.generator.tags().length ?? null,
    ranges: ctx.services?.segment
      ? ctx.services.segment.generator.snapshots().reduce((n, s) => n + s.loads, 0)
      : null,
    idsPerSecond: activity.modes.reduce((n, m) => n + m.idsPerSecond, 0),
    requestsPerSecond: activity.modes.reduce((n, m) => n + m.requestsPerSecond, 0),
  };
}

function mapChecks(
  checks: Record<string, Check>,
  fn: (check: Check, mode: string) => Check,
): Record<string, Check> {
  return Object.fromEntries(Object.entries(checks).map(([mode, c]) => [mode, fn(c, mode)]));
}

/** Writes a line to stderr at once (process.exit does not wait for a pipe). */
function say(line: string): void {
  try {
    writeSync(2, `${line}\n`);
  } catch {
    // stderr is gone too: nothing to tell
  }
}

/**
 * Runs this process as worker `slot` of its primary: waits for the primary's start message, takes
 * the worker's lock, starts the server on the shared port and serves until the primary says stop
 * (SIGTERM or SIGINT reached it), or SIGTERM reaches this process itself (the primary then starts
 * a new one). Resolves with the exit code. Exits at once, issuing nothing more, when the channel to
 * the primary closes without a stop (the primary was killed).
 */
export async function serveWorker(config: ServerConfig): Promise<number> {
  // The primary is gone (SIGKILL, a crash): stop now. A new server may already be starting on this
  // port, and only a live primary keeps two processes of one worker apart.
  process.prependListener("disconnect", () => {
    say(
      `leaf: worker process ${process.pid}: the primary process is gone; exiting at once without issuing another id`,
    );
    process.exit(1);
  });
  // Ctrl-C reaches every process of the terminal's group: the primary leads the stop.
  process.on("SIGINT", () => {});
  // Errors of a closed channel go to the callback (its 'disconnect' ends the process).
  const send = (message: FromWorker) => {
    if (!process.connected) throw new Error("the channel to the primary process is closed");
    process.send!(message, undefined, undefined, () => {});
  };
  let link: WorkerLink | undefined;
  let stopWith: ((drainMs: number | undefined) => void) | undefined;
  const stopAsked = new Promise<number | undefined>((resolve) => {
    stopWith = resolve;
  });
  const start = new Promise<Extract<FromPrimary, { leaf: "start" }>>((resolve) => {
    process.on("message", (message: unknown) => {
      if (!isLeafMessage(message)) return;
      const m = message as FromPrimary;
      if (m.leaf === "start") resolve(m);
      else if (m.leaf === "stop") stopWith!(m.drainMs);
      else link?.handle(m);
    });
  });
  process.on("SIGTERM", () => stopWith!(undefined));
  send({ leaf: "hello" });
  // Told to stop before it got its place: the server is stopping; nothing was started.
  const order = await Promise.race([start, stopAsked.then(() => undefined)]);
  if (order === undefined) return 0;
  const fail = (message: string) => {
    send({ leaf: "failed", message });
    say(message);
    return 1;
  };
  if (configSummary(config).fingerprint !== order.fingerprint) {
    return fail(
      `[leaf] [server] worker process ${order.slot}: the configuration changed since the server started ` +
        `(fingerprint ${configSummary(config).fingerprint}, the server's ${order.fingerprint}); ` +
        "a worker never serves with other settings than its siblings: restart the whole server to apply them",
    );
  }
  link = new WorkerLink(order.slot, order.count, send);
  let lock: HeldLockFile;
  try {
    lock = await workerLock(config, order.slot);
  } catch (error) {
    return fail(startMessage(error));
  }
  // Another process took this worker's lock over (only possible once it went untouched, from
  // another PID namespace): stop at once, as when the primary is gone.
  lock.lost.addEventListener("abort", () => {
    say(
      `leaf: worker process ${order.slot}: its lock ${lock.path} was taken over; exiting at once`,
    );
    process.exit(1);
  });
  let server: LeafServer;
  try {
    server = await startServer(
      { ...config, server: { ...config.server, port: order.port } },
      {
        worker: link,
        logger: {
          level: config.logLevel,
          serializers: { req: requestLogFields },
          base: { pid: process.pid, hostname: hostname(), worker: order.slot },
        },
      },
    );
  } catch (error) {
    lock.release();
    return fail(startMessage(error));
  }
  const snowflake = server.services.snowflake;
  send({
    leaf: "ready",
    workerId: snowflake?.worker.lease?.workerId,
    node: snowflake ? `${snowflake.node.ip}:${snowflake.node.port}` : undefined,
    tags: server.services.segment?.generator.tags().slice(0, 20) ?? [],
  });
  const drainMs = (await stopAsked) ?? config.server.drainMs;
  server.app.log.info({ drainMs }, "stopping: asked by the primary process or by SIGTERM");
  try {
    await server.close({ drainMs });
    lock.release();
    return 0;
  } catch (error) {
    server.app.log.error({ err: error }, "shutdown failed");
    return 1;
  }
}

/**
 * Holds `dataDir/workers/worker-{slot}.lock` while the worker runs: a new server started on the
 * same data folder (its primary restarted after a crash) cannot start this worker, the same node to
 * the registry, while the old process lives (one paused when its primary died, say). A lock left by
 * a process of another PID namespace (a previous container) is taken over once it went untouched
 * for 10 s.
 */
async function workerLock(config: ServerConfig, slot: number): Promise<HeldLockFile> {
  const { mkdir } = await import("node:fs/promises");
  const dir = join(config.dataDir, "workers");
  await mkdir(dir, { recursive: true });
  return acquireLockFileWaiting(join(dir, `worker-${slot}.lock`), {
    component: "server",
    label: `worker ${slot}`,
    resource: `worker process ${slot} of the server on ${config.dataDir}`,
    advice:
      "a process of a previous server (its primary was killed) still runs: it exits by itself once it runs again; stop it (SIGKILL is safe) and start the server again",
    foreignStaleAfterMs: SLOT_LOCK_STALE_MS,
  });
}

/** A start failure as the CLI prints one: the code first, no stack trace. */
function startMessage(error: unknown): string {
  if (isLeafError(error)) return `${error.code}: ${error.message}`;
  if (error instanceof Error) {
    return `${error.message}${error.cause instanceof Error ? ` (${error.cause.message})` : ""}`;
  }
  return String(error);
}
