// The tag's max_id moved back (issue 32), on the family's MariaDB or PostgreSQL (issue 28, item
// 5): set to 1 in SQL under load (an operator's mistake, a restored backup), and for half the draws
// one server restarted (SIGTERM, start) meanwhile, for 3-8 s; then max_id is put back to at least
// where it was. Each node keeps the end of the highest range it took per tag in its data folder
// (kept across restarts) and must refuse a row below it with CORRUPT_DATA instead of handing out
// the ids it already answered, before and after a restart.
import { type Fault, NO_ANSWER, processOf } from "./fault";
import { SQL_NAMES, serversOn, sqlSession, sqlTagOf } from "./sql-row";

/** The max_id each tag had before the fault, to put back. */
const saved = new Map<string, bigint>();

export const maxIdBack: Fault = {
  name: "max-id-back",
  title:
    "the tag's max_id set back to 1 (SQL) for 3-8 s, half the time with one server restarted meanwhile; then put back",
  // Not on a residue set: it keeps no high-water marks, and a database's max id moved back is
  // covered only for the nodes that took ranges from it before (segment README: a database
  // restored from a backup hands out its class again).
  targets: (family) => {
    const sql = sqlTagOf(family);
    return sql && !family.residue ? [sql.tag] : [];
  },
  resources: (target, family) => [
    `row:${target}`,
    `admin:${target}`,
    ...serversOn(family, sqlTagOf(family)!.store).map(processOf),
  ],
  durationMs: [3000, 8000],
  params: (rng) => ({ restart: rng.pick(["none", "A", "B", "C"]) }),
  async start(c, family, target, params) {
    const { store } = sqlTagOf(family)!;
    if (!c.store(store).running) return false;
    const session = await sqlSession(c, store).catch(() => undefined);
    if (!session) return false;
    try {
      // Read and set back under the row's lock: a range taken between a plain read and the write
      // would be above the max_id put back at the end, and handed out again after it.
      const before = await session.lockRow(target).catch(() => undefined);
      if (before === undefined) return false;
      // From here the row may be moved back whatever the answer: the fault runs, and stop() puts
      // max_id back to at least `before`.
      saved.set(target, before);
      const outcome = await session
        .setMaxId(target, 1n)
        .then(() => session.commit())
        .then(
          () => "",
          (error: Error) => ` (the commit's outcome unknown: ${error.message})`,
        );
      c.note(
        `${target}'s max_id set back from ${before} to 1 on ${SQL_NAMES[store]} (SQL)${outcome}`,
      );
    } finally {
      session.close();
    }
    const label = String(params.restart);
    if (label !== "none" && c.server(label).running) {
      await c.server(label).stop();
      const started = await c.startServer(label, 2);
      c.note(`${label} restarted with max_id moved back: ${started ? "started" : "refused"}`);
    }
    return true;
  },
  async stop(c, family, target, params) {
    const before = saved.get(target);
    saved.delete(target);
    if (before !== undefined) {
      // The operator's fix must happen, whatever else the schedule does to the store meanwhile (a
      // pause or a kill drawn over this window): tried again until it lands, for up to a minute.
      const deadline = performance.now() + 60_000;
      for (let attempt = 1; ; attempt++) {
        try {
          const session = await sqlSession(c, sqlTagOf(family)!.store);
          try {
            await session.raiseMaxId(target, before);
          } finally {
            session.close();
          }
          c.note(`${target}'s max_id put back to at least ${before} (attempt ${attempt})`);
          break;
        } catch (error) {
          if (performance.now() > deadline) throw error;
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
      }
    }
    const label = String(params.restart);
    if (label !== "none") await c.startServer(label, family.restartAttempts);
  },
  effects: (family, _target, params) => ({
    effects: [
      { servers: ["*"], codes: ["CORRUPT_DATA", ...family.storeCodes] },
      ...(params.restart !== "none"
        ? [{ servers: [String(params.restart)], codes: [...NO_ANSWER, "SHUTTING_DOWN", "CLOSED"] }]
        : []),
    ],
    settleMs: family.recoveryMs,
  }),
};
