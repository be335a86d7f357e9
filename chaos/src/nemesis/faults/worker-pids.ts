// What the worker faults share (server.workers): the workers a server's monitor lists, which
// worker a step hits (drawn), and the process a step acted on (kept here, not in the step's drawn
// parameters: two faults on one server's processes never overlap).
import type { Cluster } from "../cluster";
import type { Prng } from "../prng";
import type { Params } from "./fault";

/** Worker processes per server of the workers family. */
export const WORKERS = 2;

/** A worker process of a server, as its monitor lists it. */
export interface ListedWorker {
  slot: number;
  pid: number | undefined;
  state: string;
}

/**
 * The worker processes of `label`, as its monitor lists them; undefined when it does not answer
 * (stopped, its primary paused).
 */
export async function listedWorkers(
  c: Cluster,
  label: string,
): Promise<ListedWorker[] | undefined> {
  const state = await c
    .server(label)
    .getJson<{ workers: { list: ListedWorker[] } | null }>("/api/v1/monitor", 3000);
  return state?.workers?.list;
}

/** The pids of `label`'s worker processes, as its monitor lists them (none when it does not answer). */
export async function workerPids(c: Cluster, label: string): Promise<number[]> {
  const listed = (await listedWorkers(c, label)) ?? [];
  return listed.flatMap((w) => (w.pid === undefined ? [] : [w.pid]));
}

/** Draws the worker a step hits: 1 .. WORKERS. */
export function drawWorker(rng: Prng): Params {
  return { worker: rng.int(1, WORKERS) };
}

/** The pid of the step's worker of `target` now; undefined when the server does not list it. */
export async function workerPid(
  c: Cluster,
  target: string,
  params: Params,
): Promise<number | undefined> {
  if (!c.server(target).running) return undefined;
  const worker = (await listedWorkers(c, target))?.find((w) => w.slot === params.worker);
  return worker?.state === "running" ? worker.pid : undefined;
}

/** The worker process a fault acted on, per server (one fault per server's processes at a time). */
export const actedOn = new Map<string, number>();

/**
 * Waits (at most 20 s) until the step's worker of `target` runs again as a new process after the
 * one a fault acted on (its primary starts it again); notes it when it does not.
 */
export async function workerServingAgain(
  c: Cluster,
  target: string,
  params: Params,
): Promise<void> {
  const until = Date.now() + 20_000;
  while (Date.now() < until) {
    const worker = (await listedWorkers(c, target))?.find((w) => w.slot === params.worker);
    if (worker && worker.pid !== actedOn.get(target) && worker.state === "running") return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  c.note(`${target}: worker ${params.worker} not serving again within 20 s of its kill`);
}
