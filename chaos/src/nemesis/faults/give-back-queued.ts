// A give-back queued behind a row lock, with a range taken behind it (issue 24, item 1), on the
// family's MariaDB. Random faults almost never line this up (a row lock with a SIGTERM drew it in
// no run: the other servers' range requests queue first), so this fault orders it on purpose:
//
//   1. every other server on the table is paused (SIGSTOP), so X alone takes ranges;
//   2. once X has taken two, the row is locked (SELECT ... FOR UPDATE in another session) and X is
//      stopped with Ctrl-C (SIGINT: no drain), so its give-back of [from, end) waits on the lock;
//   3. the lock's session sets the step to end - from (an operator changing the step under load);
//   4. 4 s later one paused server, Y, is resumed: when the load uses its ids up, its range
//      request queues behind the give-back, before X's query timeout (5 s) and before its own;
//   5. the lock is held past X's query timeout (a store that sends the give-back again has queued
//      a second copy by then) and released; the other paused servers are resumed.
//
// Y's range is then [from, end) and the max id `end` again. A second copy finds it there and sets it
// back to `from`, and the next range taken (X's restart, Z) is [from, ...) once more: the ids Y
// hands out meanwhile are handed out twice. Sent once, the give-back answers outcome-unknown and
// the max id stays. X is started again when the fault stops; the step is put back to the family's.
//
// Not every draw can repeat an id even so: Y's request may come after the second copy, or ask for
// several ranges at once (its prefetch deepened), or Y read the tag list on waking and saw `end`,
// and then skips the ids below it (the segment README's observed max id); Y's own floor refuses its
// next range below `end`, so Y serves that range only until then.
import { pollFor } from "@leaf/testkit";
import type { Cluster } from "../cluster";
import type { Family } from "../families";
import { type Fault, NO_ANSWER, processOf } from "./fault";
import { type MysqlSession, mysqlSession, serversOn } from "./sql-row";

/** The store's query timeout (segment.mysql.queryTimeoutMs, default 5 s): copy two goes then. */
const QUERY_TIMEOUT_MS = 5000;
/**
 * After the give-back is seen queued, when Y is resumed: its range request queues before copy two
 * (sent 5 s after the first) and waits at most 1.4 s (the lock is released 5.4 s after the
 * give-back was seen at the latest). A node that waits longer for ids deepens its prefetch and asks
 * for more ranges as soon as the range comes: with a second copy run, its own floor then refuses
 * the tag before it hands the range out (chaos README, the once-only writes' take-out).
 */
const RESUME_AFTER_MS = 4000;
/** How long each wait (X's ranges, its give-back, Y's request) may take before the fault gives up. */
const WAIT_MS = 4000;
const POLL_MS = 20;

/** Main servers with one process each on the family's MariaDB table (A, B, C). */
function onTable(family: Family): string[] {
  return !family.mysqlTag || family.residue || family.workers ? [] : serversOn(family, "mysql");
}

/** The servers this fault paused and not yet resumed, per target. */
const paused = new Map<string, Set<string>>();
/** Targets stopped with SIGINT, to start again when the fault stops. */
const interrupted = new Set<string>();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `check` polled every POLL_MS until it answers something, or undefined after `ms`. */
const poll = <T>(ms: number, check: () => Promise<T | undefined>) => pollFor(check, ms, POLL_MS);

/** The give-backs of `tag` in `texts`: `UPDATE ... SET max_id = from WHERE ... AND max_id = end`. */
function giveBacks(texts: string[], tag: string): Array<{ from: bigint; end: bigint }> {
  const pattern = /SET max_id = (\d+) WHERE biz_tag = '([^']*)' AND max_id = (\d+)/;
  return texts.flatMap((text) => {
    const m = pattern.exec(text);
    return m && m[2] === tag ? [{ from: BigInt(m[1]!), end: BigInt(m[3]!) }] : [];
  });
}

const rangeRequests = (texts: string[]) =>
  texts.filter((t) => /SET max_id = max_id \+ /.test(t)).length;

function resume(c: Cluster, target: string, labels: string[]): void {
  const held = paused.get(target);
  for (const label of labels) {
    if (!held?.delete(label)) continue;
    const server = c.server(label);
    if (server.running) server.resume();
  }
}

/** Steps 2-5 on `session`; what happened, for the run's notes. */
async function race(
  c: Cluster,
  session: MysqlSession,
  tag: string,
  step: number,
  x: string,
  peers: string[],
): Promise<string> {
  const start = await session.maxId(tag);
  if (start === undefined) return `no row for ${tag}`;
  const taken = await poll(WAIT_MS, async () => {
    const now = await session.maxId(tag);
    return now !== undefined && now >= start + 2n * BigInt(step) ? now : undefined;
  });
  if (taken === undefined) return `${x} took no two ranges within ${WAIT_MS} ms: not stopped`;
  const end = await session.lockRow(tag);
  if (end === undefined) return `no row for ${tag}`;
  interrupted.add(x);
  void c
    .server(x)
    .interrupt()
    .catch(() => undefined);
  const queued = await poll(
    WAIT_MS,
    async () => giveBacks(await session.otherStatements(), tag)[0],
  );
  if (queued === undefined) {
    return `row locked at max_id ${end}, ${x} stopped with SIGINT; no give-back of ${x}'s queued within ${WAIT_MS} ms (a range request of its own was in flight, or it held no ids)`;
  }
  if (queued.end !== end) {
    return `${x}'s give-back of [${queued.from}, ${queued.end}) compares against ${queued.end}, not the locked max_id ${end}: it cannot match`;
  }
  const seenAt = performance.now();
  const ids = queued.end - queued.from;
  await session.setStep(tag, ids);
  await sleep(RESUME_AFTER_MS);
  const [y, ...rest] = peers;
  resume(c, x, [y!]);
  const requested = await poll(QUERY_TIMEOUT_MS - RESUME_AFTER_MS, async () => {
    const n = rangeRequests(await session.otherStatements());
    return n > 0 ? n : undefined;
  });
  // Past X's query timeout: a store that sends the give-back again has queued its second copy.
  const copies = await poll(seenAt + QUERY_TIMEOUT_MS + 400 - performance.now(), async () => {
    const n = giveBacks(await session.otherStatements(), tag).length;
    return n >= 2 ? n : undefined;
  });
  await session.commit();
  resume(c, x, rest);
  return (
    `row locked at max_id ${end}; ${x} stopped with SIGINT, its give-back of [${queued.from}, ${end}) queued; ` +
    `step set to ${ids}; ${y} resumed, ${requested ?? 0} range request(s) queued; released with ${copies ?? 1} cop${copies === undefined ? "y" : "ies"} of the give-back queued`
  );
}

export const giveBackQueued: Fault = {
  name: "give-back-queued",
  title:
    "a give-back queued behind a row lock (the others paused, SIGINT), the step set to its size, one range request queued behind it, held past the query timeout",
  targets: (family) => {
    const labels = onTable(family);
    return labels.length >= 2 ? labels : [];
  },
  resources: (_target, family) => [
    `row:${family.mysqlTag}`,
    `admin:${family.mysqlTag}`,
    ...onTable(family).map(processOf),
  ],
  durationMs: [500, 3000],
  async start(c, family, target) {
    const tag = family.mysqlTag!;
    const step = family.tags.find((t) => t.tag === tag)?.step ?? 1;
    if (!c.store("mysql").running || !c.server(target).running) return false;
    const peers = onTable(family).filter((l) => l !== target && c.server(l).running);
    if (peers.length === 0) return false;
    const session = await mysqlSession(c).catch(() => undefined);
    if (!session) return false;
    paused.set(target, new Set(peers));
    try {
      for (const label of peers) c.server(label).pause();
      c.note(`give-back-queued: ${await race(c, session, tag, step, target, peers)}`);
    } catch (error) {
      c.note(`give-back-queued: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      session.close();
      resume(c, target, peers);
    }
    return true;
  },
  async stop(c, family, target) {
    resume(c, target, onTable(family));
    const server = c.server(target);
    if (interrupted.delete(target) || !server.running) {
      if (server.running) await server.stop();
      await c.startServer(target, family.restartAttempts);
    }
    const tag = family.mysqlTag!;
    const step = family.tags.find((t) => t.tag === tag)?.step;
    const session = await mysqlSession(c).catch(() => undefined);
    if (!session || step === undefined) return;
    try {
      await session.setStep(tag, step);
    } finally {
      session.close();
    }
  },
  effects: (family) => ({
    effects: [
      {
        servers: onTable(family),
        codes: [...NO_ANSWER, "SHUTTING_DOWN", "CLOSED", ...family.storeCodes],
      },
    ],
    settleMs: family.recoveryMs,
  }),
};
