// A row lock held on the tag's leaf_alloc row for 1-8 s (SELECT ... FOR UPDATE in another session,
// committed at the end), on the family's MariaDB or PostgreSQL: every range load of the tag waits
// behind it; a give-back (SIGTERM) queued behind it must not run twice (issue 24, item 1; issue 28,
// item 5).
import { type Fault, storeEffect } from "./fault";
import { SQL_NAMES, type SqlSession, sqlSession, sqlTagOf } from "./sql-row";

const sessions = new Map<string, SqlSession>();

export const rowLock: Fault = {
  name: "row-lock",
  title: "SELECT ... FOR UPDATE on the tag's leaf_alloc row in another session for 1-8 s",
  targets: (family) => {
    const sql = sqlTagOf(family);
    return sql ? [sql.tag] : [];
  },
  resources: (target) => [`row:${target}`],
  durationMs: [1000, 8000],
  async start(c, family, target) {
    const { store } = sqlTagOf(family)!;
    if (!c.store(store).running) return false;
    const session = await sqlSession(c, store).catch(() => undefined);
    if (!session) return false;
    try {
      await session.lockRow(target);
    } catch {
      session.close();
      return false;
    }
    sessions.set(target, session);
    c.note(`${target}'s row locked on ${SQL_NAMES[store]} (SELECT ... FOR UPDATE)`);
    return true;
  },
  async stop(_c, _family, target) {
    const session = sessions.get(target);
    sessions.delete(target);
    if (!session) return;
    await session.commit().catch(() => undefined);
    session.close();
  },
  effects: (family) => ({
    effects: [storeEffect(family, ["*"], sqlTagOf(family)!.store)],
    settleMs: family.recoveryMs,
  }),
};
