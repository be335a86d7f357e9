// A stale MariaDB replica promoted, then a rolling restart (issues 25 and 32), on a family whose
// MariaDB is a primary with an asynchronous replica: the replica stops applying, so it misses the
// range updates every server then takes; the primary is killed, the replica promoted (writable,
// every server's proxy retargeted to it) and the servers restarted one by one (SIGTERM, one of them
// SIGKILL), as a deploy after a failover does. The row's max_id is now below ranges already served:
// each node must refuse the tag (CORRUPT_DATA, from its high-water mark kept in its data folder) or
// skip the ranges it knows were taken, never serve them again. After 3-8 s the operator's fix:
// max_id set to the highest mark any node keeps (the admin API), and the tag is served again.
import { highWaterOf } from "../../high-water";
import { type Cluster, sleep } from "../cluster";
import type { Family } from "../families";
import { type Fault, mainServers, NO_ANSWER } from "./fault";
import { everyServerPast } from "./stale-replica";

/** The servers on the shared MariaDB (spares included: they hold ranges when they run). */
function mysqlServers(family: Family): string[] {
  return family.servers.filter((s) => s.links.includes("mysql")).map((s) => s.label);
}

/** The servers the rolling restart restarts: the main ones on MariaDB. */
function restarted(family: Family): string[] {
  return mainServers(family).filter((label) => mysqlServers(family).includes(label));
}

/** The row's max_id on the replica. */
async function replicaMaxId(c: Cluster, tag: string): Promise<bigint> {
  const pair = c.replicaPair!;
  const rows = (await pair.query(
    pair.replica,
    `SELECT max_id FROM ${c.db!.database}.leaf_alloc WHERE biz_tag = ?`,
    [tag],
  )) as Array<{ max_id: string }>;
  return BigInt(rows[0]!.max_id);
}

/** When the replica was promoted (history ms). */
let promotedAt = 0;
/** The start of each server after the promotion (its incarnation). */
const restartedAs = new Map<string, number>();

/**
 * Ids `label` answered from its start after the promotion on, in answers received in [from, to).
 */
function restartedIds(c: Cluster, label: string, fromMs: number, toMs: number): number {
  const incarnation = restartedAs.get(label) ?? Infinity;
  let n = 0;
  for (const a of c.history.answers) {
    if (a.server !== label || a.code !== undefined || a.incarnation < incarnation) continue;
    if (a.toMs >= fromMs && a.toMs < toMs) n += a.ids;
  }
  return n;
}

/** The main servers a promotion restarts, in a drawn order. */
const ORDERS = ["ABC", "BCA", "CAB", "CBA"];

export const replicaPromoted: Fault = {
  name: "replica-promoted",
  title:
    "a MariaDB replica that stopped applying promoted (the primary killed, proxies retargeted), then A, B, C restarted one by one (SIGTERM, one SIGKILL); the row fixed at the highest mark 3-8 s later",
  targets: (family) => (family.mysqlReplica && family.mysqlTag ? [family.mysqlTag] : []),
  resources: (target, family) => [
    `row:${target}`,
    `admin:${target}`,
    "store:mysql",
    ...mysqlServers(family).flatMap((label) => [`process:${label}`, `link:${label}~mysql`]),
  ],
  durationMs: [3000, 8000],
  params: (rng) => ({
    order: rng.pick(ORDERS),
    killed: rng.pick(["A", "B", "C"]),
    staleMs: rng.int(2000, 6000),
  }),
  async start(c, family, target, params) {
    const pair = c.replicaPair;
    const labels = String(params.order).split("");
    // Once per run (the replica is then the primary), on a cluster whose servers all serve: a
    // server that takes no range while the replica is stale (stopped, or refusing the tag until a
    // restart after a max id moved back) cannot know the ranges the others took after its last
    // refresh (documented: the server README's failure table), which is not this fault; it is
    // checked again below, before the promotion.
    if (!pair || c.store("mysql") !== pair.primary || !pair.primary.running) return false;
    if (labels.some((label) => !c.server(label).running)) return false;
    await pair.waitForReplica(10_000).catch(() => undefined);
    await pair.pauseReplication();
    const frozen = await replicaMaxId(c, target);
    c.note(`replication stopped: the replica keeps ${target}'s max_id ${frozen}`);
    // Load the replica never sees for staleMs, and until every server took a range past the
    // frozen max_id (its mark).
    await sleep(Number(params.staleMs));
    if (!(await everyServerPast(c, labels, target, frozen, () => pair.resumeReplication()))) {
      return false;
    }
    await pair.primary.kill();
    await pair.promoteReplica();
    c.stores.set("mysql", pair.replica);
    for (const label of mysqlServers(family)) c.proxy(label, "mysql").retarget(pair.replica.port);
    c.note(`primary killed, the replica promoted at max_id ${frozen}, proxies retargeted`);
    promotedAt = c.history.now();
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
  },
  async stop(c, family, target) {
    // The operator's fix: max_id at the highest mark any node keeps.
    let highest = 0n;
    for (const label of mysqlServers(family)) {
      if (!c.server(label).running) continue;
      const mark = await highWaterOf(c.server(label), target);
      if (mark !== undefined && mark > highest) highest = mark;
    }
    const pair = c.replicaPair!;
    await pair.query(
      pair.replica,
      `UPDATE ${c.db!.database}.leaf_alloc SET max_id = GREATEST(max_id, ?) WHERE biz_tag = ?`,
      [highest.toString(), target],
    );
    c.note(
      `${target}'s max_id fixed on the promoted replica: at least ${highest}, the highest mark`,
    );
    // The restarted servers must serve again: their ids from the promotion to the fix, and after
    // it (up to 15 s, until each one answered ids); a promotion no restarted server served after
    // tested nothing.
    const fixedAt = c.history.now();
    const labels = restarted(family);
    const until = performance.now() + 15_000;
    while (performance.now() < until) {
      if (labels.every((label) => restartedIds(c, label, fixedAt, c.history.now()) > 0)) break;
      await sleep(500);
    }
    const now = c.history.now();
    const count = (from: number, to: number) =>
      labels.map((label) => `${label} ${restartedIds(c, label, from, to)}`).join(", ");
    c.note(
      `ids by the restarted servers (the start after the promotion and later) before the fix: ${count(promotedAt, fixedAt)}; after it: ${count(fixedAt, now)}`,
    );
  },
  effects: (family) => ({
    effects: [
      { servers: ["*"], codes: ["CORRUPT_DATA", ...family.storeCodes] },
      { servers: restarted(family), codes: [...NO_ANSWER, "SHUTTING_DOWN", "CLOSED"] },
    ],
    // The tag list is re-read every 2 s: the fixed row is found on the next read.
    settleMs: family.recoveryMs + 2000,
  }),
};
