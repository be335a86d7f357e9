// A PostgreSQL streaming replica that missed writes promoted, once a run, on a family whose
// PostgreSQL is a primary with a replica (issue 28, item 5). Replication is stopped, so the replica
// misses what the servers do next; then the primary is killed and the replica promoted.
// - Segment (`postgresTag`): until A, B and C each took a range the replica misses (a high-water
//   mark past its max_id); the servers fail over by their host list and must refuse it
//   (CORRUPT_DATA: the store's floor; after the rolling restart that follows, SIGTERM and one
//   SIGKILL, the mark in each data folder), never serve those ranges again; 3-8 s later the
//   operator's fix, max_id raised to the highest mark any node lists.
// - Registry: 2-6 s of renewals the replica misses; every server's proxy (its virtual IP) is moved
//   to the replica while it is still a standby, which refuses writes, so each holder fences; the
//   replica is promoted only once every holder fenced, as the registry README says to (asynchronous
//   replication loses leases). Skipped while a server's clock runs ahead: the README's clock-step
//   row (a failover that lost rows while a holder's clock runs ahead is not covered).
import type { PostgresReplicaPair } from "@leaf/testkit";
import { highWaterOf } from "../../high-water";
import { type Cluster, sleep } from "../cluster";
import type { Family } from "../families";
import { type Fault, mainServers, NO_ANSWER, type Params } from "./fault";
import { everyServerPast } from "./stale-replica";

/** The main servers, in a drawn order for the rolling restart. */
const ORDERS = ["ABC", "BCA", "CAB", "CBA"];

/** When the replica was promoted (history ms), for the note at the fix. */
let promotedAt = 0;
/**
 * Each server's start after the promotion (its incarnation): its ids before the fix must be none.
 */
const restartedAs = new Map<string, number>();

/** The tag's max_id on the replica (a standby answers reads). */
async function replicaMaxId(c: Cluster, pair: PostgresReplicaPair, tag: string): Promise<bigint> {
  const rows = await pair.query(
    pair.replica,
    "SELECT max_id::text AS max_id FROM leaf_alloc WHERE biz_tag = $1",
    [tag],
    c.pgDb!.database,
  );
  return BigInt(String(rows[0]!.max_id));
}

/**
 * Ids each server answered between `from` and `to` (history ms), counting only its starts from
 * `restartedAs` on when `restarted` is set.
 */
function idsBetween(
  c: Cluster,
  labels: string[],
  from: number,
  to: number,
  restarted = false,
): string {
  return labels
    .map((label) => {
      const since = restarted ? (restartedAs.get(label) ?? Infinity) : 0;
      let n = 0;
      for (const a of c.history.answers) {
        if (a.server !== label || a.code !== undefined || a.incarnation < since) continue;
        if (a.toMs >= from && a.toMs < to) n += a.ids;
      }
      return `${label} ${n}`;
    })
    .join(", ");
}

/** The segment variant: stale replica, refusals, rolling restart. */
async function promoteUnderSegment(
  c: Cluster,
  family: Family,
  pair: PostgresReplicaPair,
  tag: string,
  params: Params,
): Promise<boolean> {
  const labels = String(params.order).split("");
  await pair.waitForReplica(10_000).catch(() => undefined);
  await pair.pauseReplication();
  const frozen = await replicaMaxId(c, pair, tag);
  c.note(`replication stopped: the replica keeps ${tag}'s max_id ${frozen}`);
  await sleep(Number(params.staleMs));
  if (!(await everyServerPast(c, labels, tag, frozen, () => pair.resumeReplication()))) {
    return false;
  }
  await pair.primary.kill();
  await pair.promoteReplica();
  c.stores.set("postgres", pair.replica);
  c.note(
    `primary killed, the replica promoted at max_id ${frozen}: the servers fail over by their host list`,
  );
  promotedAt = c.history.now();
  await sleep(2000);
  for (const label of labels) {
    const server = c.server(label);
    const how = label === params.killed ? "SIGKILL" : "SIGTERM";
    if (server.running) await (how === "SIGKILL" ? server.kill() : server.stop());
    const started = await c.startServer(label, family.restartAttempts);
    restartedAs.set(label, server.incarnation);
    c.note(`${label} restarted (${how}) after the promotion: ${started ? "started" : "refused"}`);
    await sleep(1500);
  }
  return true;
}

/** The registry variant: holders fenced by the standby, then the promotion. */
async function promoteUnderRegistry(
  c: Cluster,
  family: Family,
  pair: PostgresReplicaPair,
  params: Params,
): Promise<boolean> {
  const ahead = [...c.clocks.entries()].filter(([, clock]) => clock.offsetMs > 0);
  if (ahead.length > 0) {
    c.note(`no promotion: ${ahead.map(([label]) => label).join(", ")}'s clock runs ahead`);
    return false;
  }
  await pair.pauseReplication();
  c.note("replication stopped: the replica misses the renewals from now on");
  await sleep(Number(params.staleMs));
  await pair.primary.kill();
  for (const spec of family.servers) c.proxy(spec.label, "postgres").retarget(pair.replica.port);
  c.note("primary killed, every server's proxy moved to the replica, still a standby");
  const holders = mainServers(family).filter((label) => c.server(label).running);
  const deadline = performance.now() + 15_000;
  let held = holders;
  while (held.length > 0 && performance.now() < deadline) {
    const states = await Promise.all(
      held.map((label) =>
        c
          .server(label)
          .getJson<{ snowflake?: { state?: string } }>("/api/v1/monitor", 1500)
          .then((page) => page?.snowflake?.state),
      ),
    );
    held = held.filter((_, i) => states[i] === "held");
    if (held.length > 0) await sleep(200);
  }
  c.note(
    held.length === 0
      ? `${holders.join(", ")} fenced on the standby`
      : `${held.join(", ")} still held a lease after 15 s`,
  );
  // A holder that does not answer its monitor is stopped or starved: its fence is local.
  await sleep(1000);
  await pair.promoteReplica();
  c.stores.set("postgres", pair.replica);
  promotedAt = c.history.now();
  c.note("the replica promoted: the servers lease again from it");
  return true;
}

export const postgresPromoted: Fault = {
  name: "postgres-promoted",
  title:
    "a PostgreSQL streaming replica that stopped applying promoted, the primary killed: segment, the servers fail over by their host list, then a rolling restart and the operator's max_id fix; registry, the proxies moved to the standby until every holder fenced",
  targets: (family) => (family.postgresReplica ? ["postgres"] : []),
  resources: (_target, family) => [
    "store:postgres",
    ...(family.postgresTag ? [`row:${family.postgresTag}`] : []),
    ...family.servers.flatMap((s) => [
      `process:${s.label}`,
      `link:${s.label}~postgres`,
      `clock:${s.label}`,
    ]),
  ],
  durationMs: [3000, 8000],
  params: (rng) => ({
    order: rng.pick(ORDERS),
    killed: rng.pick(["A", "B", "C"]),
    staleMs: rng.int(2000, 6000),
  }),
  async start(c, family, _target, params) {
    const pair = c.postgresPair;
    // Once per run (the replica is then the primary), on a cluster whose servers all serve.
    if (!pair || c.store("postgres") !== pair.primary || !pair.primary.running) return false;
    if (mainServers(family).some((label) => !c.server(label).running)) return false;
    if (!family.postgresTag) return promoteUnderRegistry(c, family, pair, params);
    return promoteUnderSegment(c, family, pair, family.postgresTag, params);
  },
  async stop(c, family) {
    const pair = c.postgresPair!;
    const tag = family.postgresTag;
    const labels = mainServers(family);
    if (!tag) {
      c.note(`ids since the promotion: ${idsBetween(c, labels, promotedAt, c.history.now())}`);
      return;
    }
    // The operator's fix: max_id at the highest mark any node keeps.
    let highest = 0n;
    for (const label of labels) {
      if (!c.server(label).running) continue;
      const mark = await highWaterOf(c.server(label), tag);
      if (mark !== undefined && mark > highest) highest = mark;
    }
    await pair.query(
      pair.replica,
      "UPDATE leaf_alloc SET max_id = GREATEST(max_id, $1::bigint) WHERE biz_tag = $2",
      [highest.toString(), tag],
      c.pgDb!.database,
    );
    const fixedAt = c.history.now();
    c.note(`${tag}'s max_id fixed on the promoted replica: at least ${highest}, the highest mark`);
    await sleep(4000);
    c.note(
      `ids by the servers restarted after the promotion, before the fix: ${idsBetween(c, labels, promotedAt, fixedAt, true)}; in the 4 s after it: ${idsBetween(c, labels, fixedAt, c.history.now(), true)}`,
    );
  },
  effects: (family) => ({
    effects: family.postgresTag
      ? [
          { servers: ["*"], codes: ["CORRUPT_DATA", ...family.storeCodes] },
          { servers: mainServers(family), codes: [...NO_ANSWER, "SHUTTING_DOWN", "CLOSED"] },
        ]
      : [{ servers: ["*"], codes: family.storeCodes }],
    // The tag list is re-read every 2 s: the fixed row is found on the next read.
    settleMs: family.recoveryMs + 2000,
  }),
};
