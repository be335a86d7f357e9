// A row lock held on the tag's leaf_alloc row for 1-8 s (SELECT ... FOR UPDATE in another session,
// committed at the end): every range load of the tag waits behind it; a give-back (SIGTERM) queued
// behind it must not run twice (issue 24, item 1).
import mysql from "mysql2/promise";
import { type Fault, storeEffect } from "./fault";

const sessions = new Map<string, mysql.Connection>();

export const rowLock: Fault = {
  name: "row-lock",
  title: "SELECT ... FOR UPDATE on the tag's leaf_alloc row in another session for 1-8 s",
  targets: (family) => (family.mysqlTag ? [family.mysqlTag] : []),
  resources: (target) => [`row:${target}`],
  durationMs: [1000, 8000],
  async start(c, _family, target) {
    const mysqlHandle = c.store("mysql") as unknown as {
      connectionOptions(database?: string): mysql.ConnectionOptions;
      running: boolean;
    };
    if (!mysqlHandle.running) return false;
    try {
      const conn = await mysql.createConnection({
        ...mysqlHandle.connectionOptions(c.db!.database),
        connectTimeout: 2000,
      });
      await conn.query("BEGIN");
      await conn.query("SELECT max_id FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE", [target]);
      sessions.set(target, conn);
      return true;
    } catch {
      return false;
    }
  },
  async stop(_c, _family, target) {
    const conn = sessions.get(target);
    sessions.delete(target);
    if (!conn) return;
    await conn.query("COMMIT").catch(() => undefined);
    conn.destroy();
  },
  effects: (family) => ({
    effects: [storeEffect(family, ["*"], "mysql")],
    settleMs: family.recoveryMs,
  }),
};
