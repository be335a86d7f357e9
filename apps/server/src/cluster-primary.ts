// The primary process of a server with several worker processes (server.workers): it forks them
// (node:cluster; they share the port), hands each its place (worker 1 .. N, the same for a worker
// and the process that replaces it), starts a new process for a worker that died, and on SIGTERM
// drains and stops them all as one server. It never serves a request itself. It holds what one
// process must hold (the embedded store's folder: the workers take ranges from it), answers the
// workers' gathers (readiness, metrics, the monitor, admin refreshes: see cluster-worker.ts), and
// is the only process that knows every worker's state.
//
// What keeps two processes off one worker (the registry node `ip~wK:port`, its lock, its ids):
// a worker is started again only after the 'exit' of the process before it (the kernel has reaped
// it: it issues nothing more); the worker's lock file (dataDir/workers/worker-K.lock) keeps a new
// server's worker K from starting while an old one lives; and a worker exits at once when the
// channel to its primary closes.
import cluster, { type Worker } from "node:cluster";
import { hostname } from "node:os";
import type { SegmentStore } from "@leaf/segment";
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import { storeBackend } from "./backends/index";
import {
  type FromPrimary,
  type FromWorker,
  type GatherKind,
  isLeafMessage,
  type SlotState,
  type StopStep,
  sendableError,
  type WorkerAnswer,
} from "./cluster-messages";
import type { LogLevel, ServerConfig } from "./config";
import { configSummary } from "./config-summary";
import { StoreHost } from "./ipc-store";
import { MetricsCarry } from "./metrics-carry";
import { assertPortFree, pickFreePort } from "./server";
import type { ServiceLogger } from "./service-types";

/** How long the primary waits for each worker's answer to a gather. */
const GATHER_WAIT_MS = 1000;
const METRICS_WAIT_MS = 2000;
/** First wait before a dead worker is started again; doubled per failed start, up to the cap. */
const RESTART_FIRST_MS = 100;
const RESTART_MAX_MS = 10_000;
/** A worker that ran this long before it died is restarted after the first wait again. */
const RESTART_RESET_AFTER_MS = 30_000;
/** Beyond drainMs + shutdownTimeoutMs, how long the primary waits for workers to exit at a stop. */
const STOP_GRACE_MS = 3000;

/** What the primary tells once every worker serves (for the start banner). */
export interface ServerStarted {
  url: string;
  port: number;
  workers: Array<{
    slot: number;
    pid: number | undefined;
    workerId: number | undefined;
    node: string | undefined;
    tags: string[];
  }>;
}

interface Slot {
  slot: number;
  worker: Worker | undefined;
  state: SlotState;
  startedAt: number | undefined;
  restarts: number;
  lastExit: WorkerAnswer["lastExit"];
  ready: Extract<FromWorker, { leaf: "ready" }> | undefined;
  failure: string | undefined;
  backoffMs: number;
  restartTimer: NodeJS.Timeout | undefined;
  waiting: { resolve(): void; reject(error: Error): void } | undefined;
}

/**
 * Runs the primary: starts every worker, calls `onStarted` once all of them serve, and stops them
 * all on SIGTERM (drain) or SIGINT (no drain; a second one exits at once). Resolves with the exit
 * code: 0 when every worker stopped cleanly; 1 when a worker could not start, or a stop failed.
 */
export async function servePrimary(
  config: ServerConfig,
  onStarted: (started: ServerStarted) => void,
): Promise<number> {
  const primary = new Primary(config);
  return primary.run(onStarted);
}

class Primary {
  private readonly log: PrimaryLog;
  private readonly slots: Slot[];
  private readonly registry = new Registry();
  /** The workers' counters as last seen, so the server's sums never go down (metrics-carry.ts). */
  private readonly metricsCarry = new MetricsCarry();
  private readonly restartsTotal: Counter<"worker">;
  private host: StoreHost | undefined;
  private port = 0;
  private stopping = false;
  private readonly stepsReached = new Map<StopStep, Set<number>>();
  private nextCollect = 1;
  private readonly collects = new Map<
    number,
    (slot: number, answer: { value?: unknown; error?: string }) => void
  >();

  constructor(private readonly config: ServerConfig) {
    this.log = new PrimaryLog(config.logLevel);
    this.slots = Array.from({ length: config.server.workers }, (_, i) => ({
      slot: i + 1,
      worker: undefined,
      state: "starting" as SlotState,
      startedAt: undefined,
      restarts: 0,
      lastExit: undefined,
      ready: undefined,
      failure: undefined,
      backoffMs: RESTART_FIRST_MS,
      restartTimer: undefined,
      waiting: undefined,
    }));
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.restartsTotal = new Counter({
      name: "leaf_worker_restarts_total",
      help: "Worker processes started again after their process died, by worker (server.workers).",
      labelNames: ["worker"],
      registers,
    });
    const slots = this.slots;
    new Gauge({
      name: "leaf_worker_up",
      help: "1 while the worker process serves (started, not stopping), by worker (server.workers).",
      labelNames: ["worker"],
      registers,
      collect() {
        for (const s of slots) this.set({ worker: String(s.slot) }, s.state === "running" ? 1 : 0);
      },
    });
    for (const s of this.slots) this.restartsTotal.inc({ worker: String(s.slot) }, 0);
  }

  async run(onStarted: (started: ServerStarted) => void): Promise<number> {
    const { config } = this;
    // Workers' messages carry bigints (ranges, ids): the structured clone keeps them.
    cluster.setupPrimary({ serialization: "advanced" });
    let signalled: NodeJS.Signals | undefined;
    let starting = true;
    let stopped!: (code: number) => void;
    const done = new Promise<number>((resolve) => {
      stopped = resolve;
    });
    const onSignal = (signal: NodeJS.Signals) => {
      if (signalled !== undefined) {
        // A second Ctrl-C means "now": the workers see their channel close and exit at once,
        // without releasing their leases (they expire, or are checked at the next start).
        if (signal === "SIGINT") {
          console.error("leaf: second Ctrl-C: exiting without finishing the shutdown");
          process.exit(130);
        }
        return;
      }
      signalled = signal;
      // A signal during the start is acted on once the start has finished (or failed).
      if (!starting) void this.stop(signal).then(stopped);
    };
    process.on("SIGTERM", onSignal).on("SIGINT", onSignal);
    const { host } = config.server;
    try {
      this.port = config.server.port === 0 ? await pickFreePort(host) : config.server.port;
      await assertPortFree(host, this.port);
      await this.openStore();
    } catch (error) {
      console.error(message(error));
      return 1;
    }
    const results = await Promise.allSettled(this.slots.map((s) => this.fork(s)));
    starting = false;
    const failed = results.find((r) => r.status === "rejected");
    if (failed !== undefined) {
      const reason = (failed as PromiseRejectedResult).reason as Error;
      console.error(`leaf: the server could not start: ${reason.message}`);
      await this.stop("SIGINT");
      return 1;
    }
    this.log.info(
      { workers: this.slots.map((s) => ({ worker: s.slot, workerPid: s.worker?.process.pid })) },
      `all ${this.slots.length} worker processes serve on port ${this.port}`,
    );
    if (signalled !== undefined) void this.stop(signalled).then(stopped);
    else {
      const shownHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
      onStarted({
        url: `http://${shownHost.includes(":") ? `[${shownHost}]` : shownHost}:${this.port}`,
        port: this.port,
        workers: this.slots.map((s) => ({
          slot: s.slot,
          pid: s.worker?.process.pid,
          workerId: s.ready?.workerId,
          node: s.ready?.node,
          tags: s.ready?.tags ?? [],
        })),
      });
    }
    return done;
  }

  /** The store one process must hold (the embedded store's folder), opened here for the workers. */
  private async openStore(): Promise<void> {
    const settings = this.config.segment;
    if (settings === undefined) return;
    const entry = storeBackend(settings.store);
    if (!entry.oneProcess) return;
    const context = { logger: this.log };
    let store: SegmentStore;
    try {
      store = await entry.open(settings.backend, context);
    } catch (error) {
      const { kind, target } = entry.describe(settings.backend);
      throw new Error(
        `[leaf] [server] segment mode (${kind} store in ${target}) could not start: ${message(entry.explainError?.(error) ?? error)}`,
        { cause: error },
      );
    }
    try {
      await entry.prepare?.(store, settings.backend, context);
    } catch (error) {
      await store.close().catch(() => {});
      throw error;
    }
    this.host = new StoreHost(store);
  }

  /** Starts a process for `slot`; resolves once it serves, rejects when it exits first. */
  private fork(slot: Slot): Promise<void> {
    const worker = cluster.fork();
    slot.worker = worker;
    slot.state = "starting";
    slot.startedAt = Date.now();
    slot.ready = undefined;
    slot.failure = undefined;
    worker.on("message", (m: unknown) => {
      if (isLeafMessage(m)) this.onMessage(slot, worker, m as FromWorker);
    });
    worker.on("exit", (code, signal) => this.onExit(slot, worker, code, signal));
    // A message to a process that just died is dropped, not thrown.
    worker.process.on("error", () => {});
    return new Promise<void>((resolve, reject) => {
      slot.waiting = { resolve, reject };
    });
  }

  private onMessage(slot: Slot, worker: Worker, m: FromWorker): void {
    switch (m.leaf) {
      case "hello":
        // A worker that asks for its place once the server is stopping is told to stop.
        if (this.stopping) {
          send(worker, { leaf: "stop", drainMs: 0 });
          break;
        }
        send(worker, {
          leaf: "start",
          slot: slot.slot,
          count: this.slots.length,
          port: this.port,
          fingerprint: configSummary(this.config).fingerprint,
        });
        break;
      case "ready":
        if (slot.worker !== worker) return;
        slot.ready = m;
        slot.state = this.stopping ? "stopping" : "running";
        this.log.info(
          { worker: slot.slot, workerPid: worker.process.pid, workerId: m.workerId, node: m.node },
          `worker process ${slot.slot} serves (pid ${worker.process.pid})`,
        );
        slot.waiting?.resolve();
        slot.waiting = undefined;
        break;
      case "failed":
        slot.failure = m.message;
        break;
      case "gather":
        void this.gather(worker, m.id, m.what, m.arg);
        break;
      case "collected":
        this.collects.get(m.id)?.(slot.slot, m);
        break;
      case "store":
        void this.runStore(worker, m);
        break;
      case "step":
        this.reachStep(slot, worker, m.step);
        break;
    }
  }

  /**
   * A worker reached a step of its stop. In a whole-server stop the step is passed once every
   * worker still stopping reached it (each worker waits at most a few seconds for the others);
   * a worker stopping alone passes at once.
   */
  private reachStep(slot: Slot, worker: Worker, step: StopStep): void {
    if (!this.stopping) {
      send(worker, { leaf: "step", step });
      return;
    }
    let reached = this.stepsReached.get(step);
    if (reached === undefined) {
      reached = new Set();
      this.stepsReached.set(step, reached);
    }
    reached.add(slot.slot);
    this.passSteps();
  }

  /** Passes every step all stopping workers reached (also when a worker exits meanwhile). */
  private passSteps(): void {
    for (const [step, reached] of this.stepsReached) {
      const waiting = this.slots.filter((s) => s.worker !== undefined && !reached.has(s.slot));
      if (waiting.length > 0) continue;
      this.stepsReached.delete(step);
      for (const s of this.slots) if (s.worker) send(s.worker, { leaf: "step", step });
    }
  }

  private onExit(slot: Slot, worker: Worker, code: number | null, signal: string | null): void {
    this.host?.forget(worker.id);
    if (slot.worker !== worker) return;
    slot.worker = undefined;
    slot.lastExit = { at: Date.now(), code, signal };
    const ranFor = Date.now() - (slot.startedAt ?? Date.now());
    const how = signal !== null ? `signal ${signal}` : `code ${code}`;
    if (slot.waiting) {
      slot.waiting.reject(
        new Error(
          `worker process ${slot.slot} exited (${how}) before it served${slot.failure ? `: ${slot.failure}` : ""}`,
        ),
      );
      slot.waiting = undefined;
    }
    if (this.stopping) {
      slot.state = "stopped";
      this.passSteps();
      return;
    }
    slot.state = "restarting";
    if (ranFor >= RESTART_RESET_AFTER_MS) slot.backoffMs = RESTART_FIRST_MS;
    const wait = slot.backoffMs;
    slot.backoffMs = Math.min(slot.backoffMs * 2, RESTART_MAX_MS);
    this.log.warn(
      { worker: slot.slot, workerPid: worker.process.pid, code, signal, restartInMs: wait },
      `worker process ${slot.slot} (pid ${worker.process.pid}) exited (${how}); starting it again in ${wait} ms`,
    );
    // The process is gone (reaped): a new one may now be the same node to the registry.
    slot.restartTimer = setTimeout(() => {
      slot.restartTimer = undefined;
      if (this.stopping) return;
      slot.restarts++;
      this.restartsTotal.inc({ worker: String(slot.slot) });
      this.fork(slot).catch((error: Error) =>
        this.log.error(
          { worker: slot.slot, err: error },
          `worker process ${slot.slot} could not start again`,
        ),
      );
    }, wait);
  }

  /**
   * Asks every serving worker for `what` and answers `requester` with what came within the wait.
   */
  private async gather(
    requester: Worker,
    id: number,
    what: GatherKind,
    arg: string | undefined,
  ): Promise<void> {
    const waitMs = what === "metrics" ? METRICS_WAIT_MS : GATHER_WAIT_MS;
    const asked = this.slots.filter(
      (s) => s.worker !== undefined && (s.state === "running" || s.state === "stopping"),
    );
    const got = new Map<number, { value?: unknown; error?: string }>();
    const collectId = this.nextCollect++;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, waitMs);
      this.collects.set(collectId, (slot, answer) => {
        got.set(slot, answer);
        if (got.size === asked.length) {
          clearTimeout(timer);
          resolve();
        }
      });
      for (const s of asked) send(s.worker!, { leaf: "collect", id: collectId, what, arg });
      if (asked.length === 0) {
        clearTimeout(timer);
        resolve();
      }
    });
    this.collects.delete(collectId);
    const answers: WorkerAnswer[] = this.slots.map((s) => {
      const base = {
        slot: s.slot,
        pid: s.worker?.process.pid,
        state: s.state,
        restarts: s.restarts,
        startedAt: s.worker ? s.startedAt : undefined,
        lastExit: s.lastExit,
      };
      const answer = got.get(s.slot);
      if (answer?.value !== undefined) return { ...base, value: answer.value };
      const missing =
        answer?.error ??
        (asked.includes(s)
          ? `no answer within ${waitMs} ms (the process is paused or busy)`
          : s.state === "restarting"
            ? "its process died; a new one is being started"
            : s.state);
      return { ...base, missing };
    });
    if (what === "metrics") {
      answers.push({
        slot: 0,
        pid: process.pid,
        state: this.stopping ? "stopping" : "running",
        restarts: 0,
        startedAt: undefined,
        lastExit: undefined,
        value: await this.registry.getMetricsAsJSON(),
      });
    }
    const carried = what === "metrics" ? await this.metricsCarry.carry(answers) : undefined;
    send(requester, { leaf: "gathered", id, stopping: this.stopping, answers, carried });
  }

  private async runStore(worker: Worker, m: Extract<FromWorker, { leaf: "store" }>): Promise<void> {
    let answer: FromPrimary;
    try {
      if (this.host === undefined) throw new Error("the primary process holds no store");
      answer = {
        leaf: "store-result",
        id: m.id,
        value: await this.host.run(worker.id, m.op, m.args),
      };
    } catch (error) {
      answer = { leaf: "store-result", id: m.id, error: sendableError(error) };
    }
    send(worker, answer);
  }

  /**
   * Stops every worker as one server stops: each turns not ready at once, answers for `drainMs`
   * (SIGTERM: server.drainMs; SIGINT: none), closes the port, answers its open connections, closes
   * its modes (lease released, ranges given back). Workers still running past drainMs +
   * server.shutdownTimeoutMs (a paused one) are killed. Resolves with the exit code.
   */
  private async stop(signal: NodeJS.Signals): Promise<number> {
    this.stopping = true;
    const drainMs = signal === "SIGINT" ? 0 : this.config.server.drainMs;
    this.log.info(
      { signal, drainMs },
      drainMs > 0
        ? `${signal}: every worker turns not ready and answers for ${drainMs} ms (server.drainMs), then finishes its requests and releases its lease`
        : `${signal}: every worker finishes its requests, then releases its lease`,
    );
    for (const s of this.slots) {
      if (s.restartTimer) clearTimeout(s.restartTimer);
      s.restartTimer = undefined;
      if (s.worker) {
        s.state = "stopping";
        send(s.worker, { leaf: "stop", drainMs });
      } else s.state = "stopped";
    }
    let clean = true;
    const exits = this.slots.map(
      (s) =>
        new Promise<void>((resolve) => {
          const worker = s.worker;
          if (worker === undefined || worker.isDead()) return resolve();
          worker.once("exit", (code, exitSignal) => {
            if (code !== 0 || exitSignal !== null) clean = false;
            resolve();
          });
        }),
    );
    const limit = drainMs + this.config.server.shutdownTimeoutMs + STOP_GRACE_MS;
    const timer = setTimeout(() => {
      for (const s of this.slots) {
        if (s.worker && !s.worker.isDead()) {
          this.log.error(
            { worker: s.slot, workerPid: s.worker.process.pid },
            `worker process ${s.slot} did not stop within ${limit} ms; killing it`,
          );
          clean = false;
          s.worker.process.kill("SIGKILL");
        }
      }
    }, limit);
    await Promise.all(exits);
    clearTimeout(timer);
    if (this.host) await this.host.store.close().catch(() => (clean = false));
    this.log.info({ clean }, clean ? "stopped" : "stopped, not cleanly");
    return clean ? 0 : 1;
  }
}

/** Sends to a worker; a message to one whose channel closed is dropped (its exit follows). */
function send(worker: Worker, message: FromPrimary): void {
  if (!worker.isConnected()) return;
  worker.send(message, () => {});
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

const LEVELS: Record<LogLevel, number> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
  silent: Number.POSITIVE_INFINITY,
};

/** The primary's log: JSON lines as the workers' (pino's) log, marked `role: "primary"`. */
class PrimaryLog implements ServiceLogger {
  private readonly min: number;
  private readonly host = hostname();

  constructor(level: LogLevel) {
    this.min = LEVELS[level];
  }

  info(fields: object, msg?: string): void {
    this.write(30, fields, msg);
  }

  warn(fields: object, msg?: string): void {
    this.write(40, fields, msg);
  }

  error(fields: object, msg?: string): void {
    this.write(50, fields, msg);
  }

  private write(level: number, fields: object, msg: string | undefined): void {
    if (level < this.min) return;
    const { err, ...rest } = fields as { err?: unknown };
    const line = {
      level,
      time: Date.now(),
      pid: process.pid,
      hostname: this.host,
      role: "primary",
      ...rest,
      ...(err !== undefined ? { err: { message: message(err) } } : {}),
      msg,
    };
    process.stdout.write(
      `${JSON.stringify(line, (_k, v) => (typeof v === "bigint" ? v.toString() : v))}\n`,
    );
  }
}
