// Two give-backs in a chain (the segment README's high-water marks; found by an attacker of the
// store floor on 28 Nov, commit f2a19e8): two nodes that each took a range at start (segment.load
// eager) and handed out none of it stop gracefully in turn, the later one first, so that both
// give-backs apply and max_id comes back below the range the first one stopped had taken:
//
//   1. every main server on the table is paused (SIGSTOP), so the spares alone take ranges;
//   2. H starts and takes [m0, m1), then G starts and takes [m1, m2) (max_id read after each);
//   3. G is stopped (SIGTERM) and gives [m1, m2) back: max_id m1; then H, which gives [m0, m1)
//      back: max_id m0, below the range G took;
//   4. G starts again and is asked for ids (the answers go into the history, so an id twice or a
//      refusal the README does not document for this fault fails the run); G is stopped, the
//      main servers resumed.
//
// A node must keep serving after such a chain: its high-water mark stands where it stood before
// the range it gave back, not at that range's start (which the row is now below, and which made G
// refuse the tag with CORRUPT_DATA until another server took the row past it). G and H have no
// clients, so nothing else is handed out of their ranges; the main servers' clients time out while
// paused.

import { pollFor } from "@leaf/testkit";
import type { Cluster } from "../cluster";
import type { ClientSpec, Family } from "../families";
import { ask } from "../load";
import { type Fault, NO_ANSWER, processOf } from "./fault";
import { type MysqlSession, mysqlSession, serversOn } from "./sql-row";

/** How long each range may take to show in the row before the fault gives up. */
const WAIT_MS = 6000;
const POLL_MS = 20;
/** Ids asked of G after the chain, one request each. */
const PROBES = 3;

/** The two spares of the chain (G stopped first, started again; H stopped second). */
function spares(family: Family): { g: string; h: string } | undefined {
  const labels = family.servers.filter((s) => s.spare === "give-back-chain").map((s) => s.label);
  return labels.length === 2 && family.mysqlTag ? { g: labels[0]!, h: labels[1]! } : undefined;
}

/** The servers this fault paused and not yet resumed. */
const paused = new Set<string>();

function resumeAll(c: Cluster): void {
  for (const label of paused) {
    const server = c.server(label);
    if (server.running) server.resume();
  }
  paused.clear();
}

/** max_id once it reaches `atLeast`, or undefined after WAIT_MS. */
const reaches = (session: MysqlSession, tag: string, atLeast: bigint) =>
  pollFor(
    async () => {
      const now = await session.maxId(tag);
      return now !== undefined && now >= atLeast ? now : undefined;
    },
    WAIT_MS,
    POLL_MS,
  );

/** Steps 2-4; what happened, for the run's notes. */
async function chain(
  c: Cluster,
  session: MysqlSession,
  family: Family,
  g: string,
  h: string,
): Promise<string> {
  const tag = family.mysqlTag!;
  const m0 = await session.maxId(tag);
  if (m0 === undefined) return `no row for ${tag}`;
  if (!(await c.startServer(h))) return `${h} did not start`;
  const m1 = await reaches(session, tag, m0 + 1n);
  if (m1 === undefined) return `${h} took no range within ${WAIT_MS} ms`;
  if (!(await c.startServer(g))) return `${g} did not start`;
  const m2 = await reaches(session, tag, m1 + 1n);
  if (m2 === undefined) return `${g} took no range within ${WAIT_MS} ms`;
  await c.server(g).stop();
  const afterG = await session.maxId(tag);
  await c.server(h).stop();
  const afterH = await session.maxId(tag);
  const chained = afterG === m1 && afterH === m0;
  await c.startServer(g);
  const spec: ClientSpec = {
    name: `${g} probe segment`,
    kind: "json",
    mode: "segment",
    servers: [g],
    space: `segment:${tag}`,
    increasing: true,
    tag,
  };
  let served = 0;
  for (let i = 0; i < PROBES; i++) {
    const ids = await ask(c, c.history, spec, 1, { timeoutMs: 3000 });
    served += ids?.length ?? 0;
  }
  await c.server(g).stop();
  return (
    `${h} took [${m0}, ${m1}), ${g} [${m1}, ${m2}); stopped in turn, max_id ${afterG} then ${afterH}` +
    `${chained ? " (both given back)" : " (not both given back: no chain)"}; ` +
    `${g} started again answered ${served} of ${PROBES} ids`
  );
}

export const giveBackChain: Fault = {
  name: "give-back-chain",
  title:
    "two spares that took a range at start and handed out none stop in turn (the main servers paused): both give-backs apply, and the first one started again must serve",
  targets: (family) => {
    const pair = spares(family);
    return pair && serversOn(family, "mysql").length > 0 ? [pair.g] : [];
  },
  resources: (_target, family) => {
    const pair = spares(family)!;
    return [
      `row:${family.mysqlTag}`,
      `admin:${family.mysqlTag}`,
      ...[...serversOn(family, "mysql"), pair.g, pair.h].map(processOf),
    ];
  },
  durationMs: [500, 2000],
  async start(c, family, target) {
    const pair = spares(family)!;
    if (!c.store("mysql").running) return false;
    const session = await mysqlSession(c).catch(() => undefined);
    if (!session) return false;
    try {
      for (const label of serversOn(family, "mysql")) {
        const server = c.server(label);
        if (!server.running) continue;
        server.pause();
        paused.add(label);
      }
      c.note(`give-back-chain: ${await chain(c, session, family, target, pair.h)}`);
    } catch (error) {
      c.note(`give-back-chain: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      session.close();
      resumeAll(c);
    }
    return true;
  },
  async stop(c, family) {
    resumeAll(c);
    const pair = spares(family)!;
    for (const label of [pair.g, pair.h]) {
      const server = c.server(label);
      if (server.running) await server.stop();
    }
  },
  effects: (family) => ({
    effects: [
      {
        servers: serversOn(family, "mysql"),
        codes: [...NO_ANSWER, ...family.storeCodes],
      },
    ],
    settleMs: family.recoveryMs,
  }),
};
