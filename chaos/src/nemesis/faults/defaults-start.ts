// Servers started with the defaults next to servers sharing their store (issue 24, item 5): segment
// on the family's MariaDB and snowflake mode on with no registry named, two of them (E and F) at
// once. Before the fix each took the local registry's default worker id 0, and the two issued the
// same snowflake ids; now each start must be refused (INVALID_CONFIG). A start breaks the promise
// "refusals"; a server that did start stays up under load (its clients ask while it runs) until the
// fault ends, so the ids the two issue are counted too.
import type { Cluster } from "../cluster";
import type { Family } from "../families";
import { type Fault, NO_ANSWER } from "./fault";

function defaults(family: Family): string[] {
  return family.servers.filter((s) => s.spare === "defaults").map((s) => s.label);
}

async function startOne(c: Cluster, label: string): Promise<void> {
  const outcome = await c.server(label).tryStart();
  if (outcome.started) {
    c.breaks(
      "refusals",
      `${label} (snowflake on, no registry, segment on the shared MariaDB) started: it took the default worker id`,
    );
    return;
  }
  const why = /INVALID_CONFIG[^\n]{0,200}/.exec(outcome.output)?.[0];
  if (why) c.note(`${label} refused at start as it must (exit ${outcome.code}): ${why}`);
  else {
    c.breaks(
      "refusals",
      `${label} did not start, but not with INVALID_CONFIG (exit ${outcome.code}): ${outcome.output.slice(-300)}`,
    );
  }
}

export const defaultsStart: Fault = {
  name: "defaults-start",
  title:
    "two servers with snowflake on and no registry named, next to servers sharing their MariaDB: each start must be refused",
  targets: (family) => (defaults(family).length > 0 ? [defaults(family).join("+")] : []),
  resources: (target) => target.split("+").map((label) => `process:${label}`),
  durationMs: [2000, 5000],
  async start(c, _family, target) {
    const labels = target.split("+");
    if (labels.some((l) => c.server(l).running) || !c.store("mysql").running) return false;
    await Promise.all(labels.map((label) => startOne(c, label)));
    return true;
  },
  async stop(c, _family, target) {
    for (const label of target.split("+")) {
      const server = c.server(label);
      if (server.running) await server.kill();
    }
  },
  // Their own clients may find them starting (no answer); nothing else.
  effects: (_family, target) => ({
    effects: [{ servers: target.split("+"), codes: NO_ANSWER }],
    settleMs: 1000,
  }),
};
