// The tag's max_id moved back (issue 32): set to 1 in SQL under load (an operator's mistake, a
// restored backup), and for half the draws one server restarted (SIGTERM, start) meanwhile, for
// 3-8 s; then max_id is put back to at least where it was. Each node keeps the end of the highest
// range it took per tag in its data folder (kept across restarts) and must refuse a row below it
// with CORRUPT_DATA instead of handing out the ids it already answered, before and after a restart.
import mysql from "mysql2/promise";
import type { Cluster } from "../cluster";
import { type Fault, NO_ANSWER } from "./fault";

/** The max_id each tag had before the fault, to put back. */
const saved = new Map<string, bigint>();

async function connect(c: Cluster): Promise<mysql.Connection> {
  const handle = c.store("mysql") as unknown as {
    connectionOptions(database?: string): mysql.ConnectionOptions;
  };
  return mysql.createConnection({
    ...handle.connectionOptions(c.db!.database),
    connectTimeout: 2000,
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
}

export const maxIdBack: Fault = {
  name: "max-id-back",
  title:
    "the tag's max_id set back to 1 (SQL) for 3-8 s, half the time with one server restarted meanwhile; then put back",
  // Not on a residue set: it keeps no high-water marks, and a database's max id moved back is
  // covered only for the nodes that took ranges from it before (segment README: a database
  // restored from a backup hands out its class again).
  targets: (family) => (family.mysqlTag && !family.residue ? [family.mysqlTag] : []),
  resources: (target, family) => [
    `row:${target}`,
    `admin:${target}`,
    ...family.servers
      .filter((s) => !s.spare && s.links.includes("mysql"))
      .map((s) => `process:${s.label}`),
  ],
  durationMs: [3000, 8000],
  params: (rng) => ({ restart: rng.pick(["none", "A", "B", "C"]) }),
  async start(c, _family, target, params) {
    if (!c.store("mysql").running) return false;
    const conn = await connect(c).catch(() => undefined);
    if (!conn) return false;
    try {
      const [rows] = await conn.query("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?", [target]);
      const row = (rows as Array<{ max_id: string }>)[0];
      if (!row) return false;
      saved.set(target, BigInt(row.max_id));
      await conn.query("UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = ?", [target]);
      c.note(`${target}'s max_id set back from ${row.max_id} to 1 (SQL)`);
    } finally {
      conn.destroy();
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
          const conn = await connect(c);
          try {
            await conn.query(
              "UPDATE leaf_alloc SET max_id = GREATEST(max_id, ?) WHERE biz_tag = ?",
              [before.toString(), target],
            );
          } finally {
            conn.destroy();
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
