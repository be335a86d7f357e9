// A PostgreSQL primary and a streaming replica (a base backup taken with pg_basebackup -R, so it
// starts as a hot standby following the primary), for failover tests: stop its replication so it
// misses writes, promote it, bring the old primary back writable beside it (split brain).
import { TestkitError } from "./errors";
import { connectPostgres, postgresTools, startLocalPostgres } from "./postgres";
import type { PostgresHandle, PostgresOptions } from "./types";

/** Options of {@link startPostgresReplicaPair}. */
export interface PostgresReplicaPairOptions {
  /** Further options for both servers (binDir, osUser, timeouts); `args` are appended. */
  server?: Omit<PostgresOptions, "useEnv">;
}

/**
 * A primary and its asynchronous streaming replica; both are private (LEAF_TEST_PG_URL is not
 * used).
 */
export interface PostgresReplicaPair {
  /**
   * Writable. After kill() and start() it is a primary again, writable on its own, whatever
   * happened to the replica meanwhile (a promoted replica beside it is a split brain).
   */
  readonly primary: PostgresHandle;
  /**
   * A hot standby (`pg_is_in_recovery()` true, read-only transactions) streaming from the primary,
   * also after a restart, until promoted.
   */
  readonly replica: PostgresHandle;
  /** Resolves once the replica has replayed everything the primary has written so far. */
  waitForReplica(timeoutMs?: number): Promise<void>;
  /**
   * Stops the replica's WAL receiver (its primary_conninfo emptied and reloaded): it keeps what it
   * has replayed and misses every later write of the primary. Resolves once the receiver is gone.
   */
  pauseReplication(): Promise<void>;
  /**
   * Streams again after {@link pauseReplication} (its `primary_conninfo` restored); resolves once
   * the WAL receiver runs. The replica then catches up.
   */
  resumeReplication(): Promise<void>;
  /**
   * Promotes the replica (`SELECT pg_promote()`); resolves once it accepts writes. It stays a
   * primary after a restart.
   */
  promoteReplica(): Promise<void>;
  /** Runs one statement on one server as the superuser, on a short-lived connection; its rows. */
  query(
    server: PostgresHandle,
    sql: string,
    values?: unknown[],
    database?: string,
  ): Promise<Record<string, unknown>[]>;
  /** Disposes of both servers. */
  dispose(): Promise<void>;
}

async function run(
  server: PostgresHandle,
  sql: string,
  values?: unknown[],
  database?: string,
): Promise<Record<string, unknown>[]> {
  const client = await connectPostgres(server.connectionOptions(database));
  try {
    const result = await client.query(sql, values);
    return result.rows;
  } finally {
    await client.end().catch(() => {});
  }
}

async function waitFor(
  what: string,
  timeoutMs: number,
  done: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) {
      throw new TestkitError("TESTKIT_START_FAILED", `${what} within ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * Starts two private PostgreSQL servers, the second a streaming replica of the first (a base
 * backup of it). Create databases and tables on the primary: they replicate. Replication is
 * asynchronous: a commit on the primary does not wait for the replica.
 */
export async function startPostgresReplicaPair(
  options: PostgresReplicaPairOptions = {},
): Promise<PostgresReplicaPair> {
  const serverOptions: PostgresOptions = { ...options.server, useEnv: false };
  const tools = postgresTools(serverOptions);
  const primary = await startLocalPostgres(serverOptions, tools);
  let replica: PostgresHandle | undefined;
  try {
    replica = await startLocalPostgres(serverOptions, tools, (datadir) =>
      tools.run("pg_basebackup", [
        `--host=${primary.host}`,
        `--port=${primary.port}`,
        `--username=${primary.user}`,
        `--pgdata=${datadir}`,
        // standby.signal and primary_conninfo: it starts as a standby of the primary.
        "--write-recovery-conf",
        "--wal-method=stream",
        "--checkpoint=fast",
        "--no-sync",
      ]),
    );
    const pair = makePair(primary, replica);
    await waitFor("the replica did not start streaming from the primary", 30_000, async () => {
      const rows = await run(primary, "SELECT count(*)::int AS n FROM pg_stat_replication");
      return rows[0]?.n === 1;
    });
    await pair.waitForReplica();
    return pair;
  } catch (error) {
    await replica?.dispose().catch(() => {});
    await primary.dispose().catch(() => {});
    throw error;
  }
}

function makePair(primary: PostgresHandle, replica: PostgresHandle): PostgresReplicaPair {
  /** The replica's `primary_conninfo` before a pause (the base backup's), restored by a resume. */
  let conninfo: string | undefined;
  const receivers = async () => {
    const rows = await run(replica, "SELECT count(*)::int AS n FROM pg_stat_wal_receiver");
    return rows[0]?.n as number;
  };
  return {
    primary,
    replica,
    async waitForReplica(timeoutMs = 30_000) {
      const [position] = await run(primary, "SELECT pg_current_wal_lsn()::text AS lsn");
      const lsn = String(position?.lsn);
      await waitFor(
        `the replica did not replay the primary's WAL up to ${lsn}`,
        timeoutMs,
        async () => {
          const [row] = await run(
            replica,
            "SELECT coalesce(pg_wal_lsn_diff(pg_last_wal_replay_lsn(), $1::pg_lsn) >= 0, false) AS done",
            [lsn],
          );
          return row?.done === true;
        },
      );
    },
    async pauseReplication() {
      const [row] = await run(replica, "SELECT current_setting('primary_conninfo') AS conninfo");
      if (typeof row?.conninfo === "string" && row.conninfo !== "") conninfo = row.conninfo;
      await run(replica, "ALTER SYSTEM SET primary_conninfo = ''");
      await run(replica, "SELECT pg_reload_conf()");
      await waitFor("the replica's WAL receiver did not stop", 30_000, async () => {
        return (await receivers()) === 0;
      });
    },
    async resumeReplication() {
      if (conninfo === undefined) {
        throw new TestkitError(
          "TESTKIT_START_FAILED",
          `the replica on 127.0.0.1:${replica.port} was not paused by this pair: no primary_conninfo to restore`,
        );
      }
      await run(replica, `ALTER SYSTEM SET primary_conninfo = ${quoteLiteral(conninfo)}`);
      await run(replica, "SELECT pg_reload_conf()");
      await waitFor("the replica's WAL receiver did not start again", 30_000, async () => {
        return (await receivers()) === 1;
      });
    },
    async promoteReplica() {
      const [row] = await run(replica, "SELECT pg_promote(true, 60) AS promoted");
      if (row?.promoted !== true) {
        throw new TestkitError(
          "TESTKIT_START_FAILED",
          `the replica on 127.0.0.1:${replica.port} was not promoted within 60 s`,
        );
      }
    },
    query: run,
    async dispose() {
      await Promise.allSettled([replica.dispose(), primary.dispose()]);
    },
  };
}

/** `text` as an SQL string literal (ALTER SYSTEM takes no parameters). */
function quoteLiteral(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}
