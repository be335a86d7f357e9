// A server started with the defaults next to servers sharing its store (issue 24, item 5): segment
// on the family's MariaDB and snowflake mode on with no registry named. Before the fix it took the
// local registry's default worker id 0, as every such server does, and two of them issued the same
// snowflake ids; now its start must be refused (INVALID_CONFIG). A start is a broken promise.
import type { Fault } from "./fault";

export const defaultsStart: Fault = {
  name: "defaults-start",
  title:
    "a server with snowflake on and no registry named, next to servers sharing its MariaDB: its start must be refused",
  targets: (family) => family.servers.filter((s) => s.spare === "defaults").map((s) => s.label),
  resources: (target) => [`process:${target}`],
  durationMs: [500, 2000],
  async start(c, _family, target) {
    const server = c.server(target);
    if (server.running || !c.store("mysql").running) return false;
    const outcome = await server.tryStart();
    if (outcome.started) {
      c.breaks(
        "refusals",
        `${target} (snowflake on, no registry, segment on the shared MariaDB) started: the default worker id was taken`,
      );
    } else {
      const why = /INVALID_CONFIG[^\n]{0,200}/.exec(outcome.output)?.[0];
      if (why) c.note(`${target} refused at start as it must (exit ${outcome.code}): ${why}`);
      else {
        c.breaks(
          "refusals",
          `${target} did not start, but not with INVALID_CONFIG (exit ${outcome.code}): ${outcome.output.slice(-300)}`,
        );
      }
    }
    return true;
  },
  async stop(c, _family, target) {
    const server = c.server(target);
    if (server.running) await server.kill();
  },
  effects: () => ({ effects: [], settleMs: 0 }),
};
