// The two-fault hand-over of a leased worker id: the holder's wall clock steps forward
// (libfaketime) after a renewal, then its link to the store is cut (TcpProxy); a second holder is
// granted the id, and every id of both is counted. The holder runs in its own process
// (printIdsUntilKilled); the registry-specific parts (how to start each holder) come from the test.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChildLines } from "./child-lines";
import { countRepeatedIds, IdLog } from "./duplicates";
import { TestkitError } from "./errors";
import { FakeClock } from "./faketime";
import { startedRetrying } from "./started";
import { TcpProxy } from "./tcp-proxy";

/**
 * Ids the second holder takes per millisecond turn: it meets every tick the first may have used
 * (both start each tick's sequence at 0) without keeping millions of ids.
 */
const SECOND_BATCH = 50;

/** Something that issues ids in batches: a SnowflakeWorker, a generator. */
export interface IdSource {
  nextIds(count: number): bigint[];
}

/** A holder started in the test's own process. */
export interface SecondHolder extends IdSource {
  close(): Promise<void>;
}

/**
 * The loop of a holder process: issues `batch` ids at a time (default 20), printing each batch as
 * one line `{"ids":[...],"at":<its Date.now()>}` before it counts as issued, with an event-loop
 * turn between batches (renewals run), or a pause of `pauseMs`. A refusal prints
 * `{"refused":<code>,"at":...}` once per change of outcome, and the loop tries again a millisecond
 * later: a refusal that a renewal lifts is seen lifted. Runs until the process is killed.
 */
export async function printIdsUntilKilled(
  source: IdSource,
  { batch = 20, pauseMs = 0 }: { batch?: number; pauseMs?: number } = {},
): Promise<never> {
  const print = (value: object) => process.stdout.write(`${JSON.stringify(value)}\n`);
  let refused: string | undefined;
  for (;;) {
    try {
      const ids = source.nextIds(batch);
      refused = undefined;
      print({ ids: ids.map(String), at: Date.now() });
      await new Promise((resolve) =>
        pauseMs > 0 ? setTimeout(resolve, pauseMs) : setImmediate(resolve),
      );
    } catch (error) {
      const code = String((error as { code?: unknown }).code ?? error);
      if (code !== refused) print({ refused: code, at: Date.now() });
      refused = code;
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }
}

/** Options of {@link clockStepHandOver}. */
export interface ClockStepHandOverOptions {
  /** Port of the store (on 127.0.0.1): the first holder reaches it through a TcpProxy. */
  storePort: number;
  /**
   * Spawns the first holder (spawnNode), reaching the store at `storeAddress` ("127.0.0.1:port"),
   * with `env` (its fake clock) added. It prints `{"started":true}` once it holds the id, then runs
   * {@link printIdsUntilKilled}.
   */
  spawnFirst(storeAddress: string, env: Record<string, string>): ChildProcess;
  /**
   * Starts the second holder in this process on the same id, reaching the store directly. Called
   * again while it rejects with WORKER_IDS_EXHAUSTED (the first's lease has not ended yet).
   */
  startSecond(): Promise<SecondHolder>;
  /** The timestamp (ms since the Unix epoch) of an id, by the layout both holders use. */
  timestampOf(id: bigint): number;
  /**
   * How long (ms) the store keeps a lease without renewal: the first holder issues at most this
   * long after the cut.
   */
  leaseMs: number;
  /** How far the first holder's wall clock steps forward (default 10,000 ms). */
  stepMs?: number;
  /** ms between the step and the cut (default 60). */
  cutAfterMs?: number;
  /** How long the first holder issues before the step (default 1,500 ms: renewals have run). */
  warmUpMs?: number;
  /**
   * The fault `cutAfterMs` after the step (default: the first holder's link cut, `proxy.cutOff()`).
   * It may take time (the store paused past the lease, then resumed): the second holder is started
   * once it resolves. With `stepMs` 0 it is the only fault.
   */
  fault?: (proxy: TcpProxy) => Promise<void> | void;
  /** The second holder issues at least this long (ms) once granted (default 0). */
  secondMinMs?: number;
}

/** What {@link clockStepHandOver} counted. */
export interface ClockStepHandOver {
  /** Ids the first holder printed, before and after the step. */
  firstIds: number;
  /** Ids the second holder issued. */
  secondIds: number;
  /** Ids issued twice, across both. */
  duplicates: number;
  examples: bigint[];
  /**
   * The latest clock reading the first holder printed (ms): past real time by the step once it
   * stepped.
   */
  firstClockMax: number;
  /** Date.now() of this process when the link was cut (when the fault began). */
  cutAt: number;
  /** The highest timestamp of the first holder's ids (0 when none). */
  firstMaxTimestamp: number;
  /** The lowest timestamp of the second holder's ids (0 when none). */
  secondMinTimestamp: number;
  /** What the first holder printed when refused, in order (e.g. LEASE_LOST). */
  refusals: string[];
  /** Batches the second holder was refused with LEASE_LOST (a renewal late on a busy machine). */
  secondFenced: number;
}

/**
 * Runs the two-fault scenario: the first holder issues for `warmUpMs`, its wall clock steps forward
 * by `stepMs`, `cutAfterMs` later its link to the store is cut; the second holder is started once
 * the store grants it the id, and issues (paced, 50 ids a millisecond) until this clock has
 * passed the cut + the step + the lease + 1 s, beyond every timestamp the first could have reached
 * before its fence. Then every id of both is counted.
 */
export async function clockStepHandOver(
  options: ClockStepHandOverOptions,
): Promise<ClockStepHandOver> {
  const stepMs = options.stepMs ?? 10_000;
  const dir = mkdtempSync(join(tmpdir(), "leaf-clock-step-"));
  const clock = new FakeClock({ file: join(dir, "faketime.offset") });
  const proxy = await TcpProxy.start({ targetPort: options.storePort });
  const first = new ChildLines(options.spawnFirst(proxy.address, clock.env()));
  let second: SecondHolder | undefined;
  try {
    await first.until((lines) => lines.some((l) => l.includes('"started"')), "the first holder");
    await first.until((lines) => lines.some((l) => l.startsWith('{"ids"')), "the first's ids");
    await sleep(options.warmUpMs ?? 1500);
    clock.set(stepMs);
    await sleep(options.cutAfterMs ?? 60);
    const cutAt = Date.now();
    if (options.fault) await options.fault(proxy);
    else proxy.cutOff();
    second = await startWhenGranted(
      options.startSecond,
      Date.now() + stepMs + options.leaseMs + 60_000,
    );
    const secondIds = new IdLog();
    const until = Math.max(
      cutAt + stepMs + options.leaseMs + 1000,
      Date.now() + (options.secondMinMs ?? 0),
    );
    let secondFenced = 0;
    while (Date.now() < until) {
      try {
        for (const id of second.nextIds(SECOND_BATCH)) secondIds.push(id);
      } catch (error) {
        // A renewal late on a busy machine fences the second holder until it arrives (LEASE_LOST,
        // not sticky): it issues nothing meanwhile, which is what it must do. Anything else fails.
        if ((error as { code?: unknown }).code !== "LEASE_LOST") throw error;
        secondFenced++;
      }
      await sleep(1);
    }
    await second.close();
    second = undefined;
    const firstIds = new IdLog();
    let firstClockMax = 0;
    const refusals: string[] = [];
    for (const line of first.json<{ ids?: string[]; at?: number; refused?: string }>()) {
      for (const id of line.ids ?? []) firstIds.push(BigInt(id));
      if (line.refused) refusals.push(line.refused);
      firstClockMax = Math.max(firstClockMax, line.at ?? 0);
    }
    const counted = countRepeatedIds([firstIds, secondIds], 5);
    return {
      firstIds: firstIds.count,
      secondIds: secondIds.count,
      duplicates: counted.duplicates,
      examples: counted.examples,
      firstClockMax,
      cutAt,
      firstMaxTimestamp: firstIds.count ? options.timestampOf(extreme(firstIds, 1)) : 0,
      secondMinTimestamp: secondIds.count ? options.timestampOf(extreme(secondIds, -1)) : 0,
      refusals,
      secondFenced,
    };
  } finally {
    await second?.close().catch(() => {});
    const pid = first.child.pid;
    await first.kill();
    if (pid !== undefined) clock.cleanUp(pid);
    await proxy.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The highest (`sign` 1) or lowest (-1) id of a non-empty log. */
function extreme(log: IdLog, sign: 1 | -1): bigint {
  let found: bigint | undefined;
  for (const part of log.parts()) {
    for (const id of part)
      if (found === undefined || (sign > 0 ? id > found : id < found)) found = id;
  }
  return found!;
}

/** Starts the second holder, again while the store says the id is still held. */
function startWhenGranted(
  start: () => Promise<SecondHolder>,
  deadline: number,
): Promise<SecondHolder> {
  return startedRetrying(start, { codes: ["WORKER_IDS_EXHAUSTED"], deadline });
}

function sleep(ms: number): Promise<void> {
  if (!Number.isFinite(ms) || ms < 0) {
    throw new TestkitError("TESTKIT_BAD_OPTION", `a wait is ms of 0 or more, got ${ms}`);
  }
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Options of {@link clockStepRestart}. */
export interface ClockStepRestartOptions {
  /**
   * Spawns a holder of the fixed id (spawnNode) with `env` (its fake clock) added; called twice,
   * with the same node identity: the first holder, then its restart. It prints `{"started":true}`
   * once it holds the id, then runs {@link printIdsUntilKilled}.
   */
  spawnHolder(env: Record<string, string>): ChildProcess;
  /** The timestamp (ms since the Unix epoch) of an id, by the layout the holders use. */
  timestampOf(id: bigint): number;
  /** How far the first holder's wall clock steps forward (default 20,000 ms). */
  stepMs?: number;
  /** ms between the step and the SIGKILL (default 500: before the next report). */
  killAfterMs?: number;
  /** How long the first holder issues before the step (default 2,000 ms: reports have landed). */
  warmUpMs?: number;
}

/** What {@link clockStepRestart} counted. */
export interface ClockStepRestart {
  firstIds: number;
  secondIds: number;
  duplicates: number;
  examples: bigint[];
  /** The latest clock reading the first holder printed (ms). */
  firstClockMax: number;
  /** Date.now() of this process when the clock stepped. */
  steppedAt: number;
  firstMaxTimestamp: number;
  secondMinTimestamp: number;
  /** What the first holder printed when refused, in order (e.g. LEASE_LOST). */
  refusals: string[];
}

/**
 * A fixed id's holder (the same node restarting is its next holder) under a wall clock stepped
 * forward: the first holder issues for `warmUpMs`, its clock steps forward by `stepMs`, it is
 * SIGKILLed `killAfterMs` later (before its next report), the clock is set right again (NTP), and
 * the node restarts with the same identity. The restart issues until this clock has passed every
 * timestamp the first printed + 1 s; every id of both is counted.
 */
export async function clockStepRestart(
  options: ClockStepRestartOptions,
): Promise<ClockStepRestart> {
  const stepMs = options.stepMs ?? 20_000;
  const dir = mkdtempSync(join(tmpdir(), "leaf-clock-restart-"));
  const clock = new FakeClock({ file: join(dir, "faketime.offset") });
  const first = new ChildLines(options.spawnHolder(clock.env()));
  let second: ChildLines | undefined;
  try {
    await untilIssuing(first, "the first holder");
    await sleep(options.warmUpMs ?? 2000);
    clock.set(stepMs);
    const steppedAt = Date.now();
    await sleep(options.killAfterMs ?? 500);
    await first.kill();
    clock.set(0);
    const firstLog = readHolder(first, options.timestampOf);
    second = new ChildLines(options.spawnHolder(clock.env()));
    await untilIssuing(second, "the restarted holder");
    while (Date.now() < Math.max(firstLog.clockMax, firstLog.maxTimestamp) + 1000) await sleep(100);
    await second.kill();
    const secondLog = readHolder(second, options.timestampOf);
    const counted = countRepeatedIds([firstLog.ids, secondLog.ids], 5);
    return {
      firstIds: firstLog.ids.count,
      secondIds: secondLog.ids.count,
      duplicates: counted.duplicates,
      examples: counted.examples,
      firstClockMax: firstLog.clockMax,
      steppedAt,
      firstMaxTimestamp: firstLog.maxTimestamp,
      secondMinTimestamp: secondLog.minTimestamp,
      refusals: firstLog.refusals,
    };
  } finally {
    for (const holder of [first, second]) {
      if (!holder) continue;
      const pid = holder.child.pid;
      await holder.kill();
      if (pid !== undefined) clock.cleanUp(pid);
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

async function untilIssuing(holder: ChildLines, what: string): Promise<void> {
  await holder.until((lines) => lines.some((l) => l.includes('"started"')), what);
  await holder.until((lines) => lines.some((l) => l.startsWith('{"ids"')), `${what}'s ids`);
}

/** Every id a holder process printed, with its extremes, its latest clock reading and refusals. */
function readHolder(holder: ChildLines, timestampOf: (id: bigint) => number) {
  const ids = new IdLog();
  let clockMax = 0;
  let maxTimestamp = 0;
  let minTimestamp = 0;
  const refusals: string[] = [];
  for (const line of holder.json<{ ids?: string[]; at?: number; refused?: string }>()) {
    for (const text of line.ids ?? []) {
      const id = BigInt(text);
      ids.push(id);
      const at = timestampOf(id);
      maxTimestamp = Math.max(maxTimestamp, at);
      minTimestamp = minTimestamp === 0 ? at : Math.min(minTimestamp, at);
    }
    if (line.refused) refusals.push(line.refused);
    clockMax = Math.max(clockMax, line.at ?? 0);
  }
  return { ids, clockMax, maxTimestamp, minTimestamp, refusals };
}
