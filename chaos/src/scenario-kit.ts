// What every scenario file shares: the Scenario shape, how a server's loops and config are made,
// and the checks that recur (a phase where some loops answered every request, one where they were
// refused with one code and nothing else, a start that was refused, servers that serve again).
import type { LeafProcess, StartOutcome } from "./leaf-process";
import type { LoopCounters, LoopTarget } from "./load-driver";
import type { ScenarioRun } from "./scenario-run";
import type { RegistryKind, RegistryPlace } from "./server-configs";
import type { SegmentDatabase, ServiceNeeds } from "./services";

/** The kinds of fault; the short form runs one scenario of each but PostgreSQL and disk. */
export type FaultKind =
  | "process"
  | "MariaDB"
  | "PostgreSQL"
  | "ZooKeeper"
  | "Redis"
  | "clock"
  | "network"
  | "disk";

/** A scenario. */
export interface Scenario {
  /** Stable id: "sigkill-restart:zk". */
  name: string;
  kind: FaultKind;
  /** What is done, in one sentence. */
  title: string;
  /** The behaviour the documentation promises, which the checks hold the processes to. */
  documented: string;
  needs: ServiceNeeds & { faketime?: boolean; root?: boolean };
  /** Seconds the phases take (sets the pace of the load). */
  plannedSeconds: number;
  /** Part of the short form (CI). */
  short: boolean;
  /** Runs the phases and checks; returns a one-line summary of what the processes did. */
  run(s: ScenarioRun): Promise<string>;
}

/** "1.2 s", or "-" for a wait that never ended. */
export const seconds = (ms: number | undefined) =>
  ms === undefined ? "-" : `${(ms / 1000).toFixed(1)} s`;

/** Registries whose worker id is fixed per ip:port (a restart gets the same id back). */
export const FIXED_ID: Record<RegistryKind, boolean> = {
  zk: true,
  "zk-recycle": false,
  mysql: true,
  "mysql-lease": false,
  local: true,
};

/** The run's stores a registry needs. */
export function registryNeeds(registry: RegistryKind): ServiceNeeds {
  return registry === "zk" || registry === "zk-recycle"
    ? { zookeeper: true }
    : registry === "local"
      ? {}
      : { mysql: true };
}

/** Where a server's registry keeps its worker id: the run's ZooKeeper, `db`, or `localId`. */
export function place(
  s: ScenarioRun,
  registry: RegistryKind,
  db: SegmentDatabase | undefined,
  localId: number,
): RegistryPlace {
  return {
    zookeeper: registry.startsWith("zk") ? s.ctx.services.requireZookeeper().url : undefined,
    mysqlUrl: registry.startsWith("mysql") ? db?.url : undefined,
    localWorkerId: localId,
  };
}

/** Loops of one server: one per mode it serves. */
export function loopsOf(
  server: LeafProcess,
  modes: {
    segment?: { tag: string; space: string };
    snowflake?: { space: string; increasing?: boolean };
    redis?: { shard: number; space: string };
  },
): LoopTarget[] {
  const loops: LoopTarget[] = [];
  if (modes.segment) {
    loops.push({
      server,
      endpoint: { mode: "segment", tag: modes.segment.tag },
      space: modes.segment.space,
      increasing: true,
    });
  }
  if (modes.snowflake) {
    loops.push({
      server,
      endpoint: { mode: "snowflake", key: "chaos" },
      space: modes.snowflake.space,
      increasing: modes.snowflake.increasing ?? true,
    });
  }
  if (modes.redis) {
    loops.push({
      server,
      endpoint: { mode: "redisSequence", shard: modes.redis.shard },
      space: modes.redis.space,
      increasing: false,
    });
  }
  return loops;
}

/**
 * Load on one segment tag from every server, plus snowflake load on each server's own id space
 * (servers with different registries issue under different leaf names).
 */
export function loadSharedTag(
  s: ScenarioRun,
  db: SegmentDatabase,
  tag: string,
  segmentSpace: string,
  servers: [LeafProcess, string][],
): void {
  s.segmentSpace(segmentSpace, db, tag);
  for (const [server, space] of servers) s.snowflakeSpace(space, [server]);
  s.startLoad(
    servers.flatMap(([server, space]) =>
      loopsOf(server, { segment: { tag, space: segmentSpace }, snowflake: { space } }),
    ),
  );
}

/** A segment step whose range lasts about `seconds` at `idsPerSecond`. */
export function stepLasting(idsPerSecond: number, seconds: number): number {
  return Math.max(50, Math.round(idsPerSecond * seconds));
}

/** Failures of `code` ("503 LEASE_LOST (-4)" counts for "LEASE_LOST"), summed. */
export function countCode(errors: Record<string, number>, code: string): number {
  return Object.entries(errors)
    .filter(([key]) => key.split(" ")[1] === code)
    .reduce((sum, [, n]) => sum + n, 0);
}

/** Whether every failure in `errors` has `code`. */
export function onlyCode(errors: Record<string, number>, code: string): boolean {
  return Object.keys(errors).every((key) => key.split(" ")[1] === code);
}

/** Selects the loops of `server` in phase totals. */
export const isServer = (server: LeafProcess) => (label: string) =>
  label.startsWith(`${server.label} `);

/** Selects the loops of `server` in load counters. */
export const loopsOfServer = (server: LeafProcess) => (c: LoopCounters) =>
  c.server === server.label;

/** "503 X (-3) x12, ECONNREFUSED x2", or "none". */
export const codes = (errors: Record<string, number>) =>
  Object.entries(errors)
    .map(([code, n]) => `${code} x${n}`)
    .join(", ") || "none";

/** Checks that `who` (the loops `which` selects) got ids and no failure during `phase`. */
export function expectServed(
  s: ScenarioRun,
  phase: string,
  which: (label: string) => boolean,
  who: string,
): boolean {
  const t = s.phaseTotals(phase, which);
  return s.expect(
    Object.keys(t.errors).length === 0 && t.ids > 0,
    `${who} answered every request during "${phase}" (${t.ids} ids, errors: ${codes(t.errors)})`,
  );
}

/**
 * Checks that `who` was refused with `code` during `phase`, and with nothing else (two checks);
 * returns the number of such refusals.
 */
export function expectRefused(
  s: ScenarioRun,
  phase: string,
  which: (label: string) => boolean,
  code: string,
  who: string,
): number {
  const t = s.phaseTotals(phase, which);
  const n = countCode(t.errors, code);
  s.expect(n > 0, `${who} refused with ${code} during "${phase}" (x${n}; ${codes(t.errors)})`);
  s.expect(onlyCode(t.errors, code), `${who} failed with nothing else (${codes(t.errors)})`);
  return n;
}

/** Waits until each of `servers` gets ids again; the longest wait in ms, or undefined. */
export async function allServing(
  s: ScenarioRun,
  servers: LeafProcess[],
  timeoutMs: number,
  mode?: LoopCounters["mode"],
): Promise<number | undefined> {
  const waits = await Promise.all(servers.map((server) => s.waitForIds(server, timeoutMs, mode)));
  return waits.every((w) => w !== undefined) ? Math.max(...(waits as number[])) : undefined;
}

/** Which start-up check refused a start, read from the process's last words. */
export function refusalOf(outcome: StartOutcome): {
  refused: boolean;
  check: string | undefined;
  text: string;
} {
  if (outcome.started) return { refused: false, check: undefined, text: "it STARTED" };
  const line = /refusing to start[^\n]*/.exec(outcome.output)?.[0];
  const check =
    line === undefined
      ? undefined
      : /behind the last timestamp/.test(line)
        ? "stored timestamp"
        : /live peer/.test(line)
          ? "peer clocks"
          : "other";
  return {
    refused: outcome.code === 1 && line !== undefined,
    check,
    text: `exit code ${outcome.code}, "${lastWords(line ?? outcome.output)}"`,
  };
}

/** The last two lines of a process's output, cut to 260 characters. */
export function lastWords(output: string): string {
  const shown = output.trim().split("\n").slice(-2).join(" ");
  return `${shown.slice(0, 260)}${shown.length > 260 ? "..." : ""}`;
}

/** The messages the loops of `server` were told ("503 CODE (-3): message"), one of each kind. */
export function messagesOf(s: ScenarioRun, server: LeafProcess): string[] {
  return s.load
    .reports()
    .filter((r) => r.server === server.label)
    .flatMap((r) =>
      Object.entries(r.errors).flatMap(([code, tally]) =>
        tally.samples.map((m) => `${code}: ${m}`),
      ),
    );
}

/** Polls `condition` every 100 ms for up to `timeoutMs`; the ms it took, or undefined. */
export async function until(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
): Promise<number | undefined> {
  const start = performance.now();
  while (performance.now() - start < timeoutMs) {
    if (await condition()) return performance.now() - start;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return undefined;
}
