// A MariaDB primary and replica with real replication (binary log on the primary, CHANGE MASTER TO
// on the replica, replica read_only=ON), for failover tests: kill the primary, promote the replica.
import type { Connection } from "mysql2/promise";
import { TestkitError } from "./errors";
import { startMysql } from "./mysql";
import type { MysqlHandle, MysqlOptions } from "./types";

/** Options of {@link startMysqlReplicaPair}. */
export interface MysqlReplicaPairOptions {
  /**
   * Semi-synchronous replication with the AFTER_SYNC wait point (default true): a commit is
   * acknowledged to the client only once the replica has the transaction, so a failover loses no
   * acknowledged write (what Meituan runs under Leaf). False gives plain asynchronous replication.
   */
  semiSync?: boolean;
  /** Further options for both servers (mariadbd, installDb, timeouts); `args` are appended. */
  server?: Omit<MysqlOptions, "useEnv">;
}

/** A primary and its replica; every server is private (LEAF_TEST_MYSQL_URL is not used). */
export interface MysqlReplicaPair {
  /**
   * Binary log on, server id 1. Its read_only is not persisted: it comes back writable after a
   * restart.
   */
  readonly primary: MysqlHandle;
  /** Server id 2, read_only=ON (also after a restart), replicating from the primary. */
  readonly replica: MysqlHandle;
  /** Resolves once the replica has applied everything the primary has written so far. */
  waitForReplica(timeoutMs?: number): Promise<void>;
  /** Stops the replica's replication threads (it keeps what it has applied and falls behind). */
  pauseReplication(): Promise<void>;
  /** Starts them again after {@link pauseReplication}: the replica catches up. */
  resumeReplication(): Promise<void>;
  /** Promotes the replica as an operator does: `STOP SLAVE; SET GLOBAL read_only = OFF`. */
  promoteReplica(): Promise<void>;
  /** Runs statements on one server as root, on a short-lived connection. */
  query(server: MysqlHandle, sql: string, values?: unknown[]): Promise<unknown>;
  /** Disposes of both servers. */
  dispose(): Promise<void>;
}

async function connection(server: MysqlHandle): Promise<Connection> {
  const { createConnection } = await import("mysql2/promise");
  return createConnection({
    ...server.connectionOptions(),
    connectTimeout: 5_000,
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
}

async function run(server: MysqlHandle, sql: string, values?: unknown[]): Promise<unknown> {
  const conn = await connection(server);
  try {
    const [result] = await conn.query(sql, values);
    return result;
  } finally {
    await conn.end().catch(() => conn.destroy());
  }
}

/**
 * Starts two private MariaDB servers, the second replicating from the first. Create databases and
 * tables on the primary: they replicate. The replica is read_only=ON and comes back so after a
 * restart; the primary has no read_only setting, so after `kill()` and `start()` it is writable
 * again, as a restarted MySQL primary is unless `read_only` is in its configuration file.
 */
export async function startMysqlReplicaPair(
  options: MysqlReplicaPairOptions = {},
): Promise<MysqlReplicaPair> {
  const semiSync = options.semiSync ?? true;
  const extra = options.server?.args ?? [];
  const primary = await startMysql({
    ...options.server,
    useEnv: false,
    args: [
      "--server-id=1",
      "--log-bin=primary-bin",
      "--binlog-format=ROW",
      ...(semiSync
        ? [
            "--rpl-semi-sync-master-enabled=ON",
            "--rpl-semi-sync-master-wait-point=AFTER_SYNC",
            // Long enough never to fall back to asynchronous replication in a test; once no replica
            // is connected (the old primary after a restart) commits do not wait for one.
            "--rpl-semi-sync-master-timeout=600000",
            "--rpl-semi-sync-master-wait-no-slave=OFF",
          ]
        : []),
      ...extra,
    ],
  });
  let replica: MysqlHandle | undefined;
  try {
    replica = await startMysql({
      ...options.server,
      useEnv: false,
      args: [
        "--server-id=2",
        "--read-only=ON",
        "--slave-net-timeout=5",
        ...(semiSync ? ["--rpl-semi-sync-slave-enabled=ON"] : []),
        ...extra,
      ],
    });
    // Both data folders are copies of one template, so the replica starts from the primary's first
    // binary log event.
    await run(
      replica,
      "CHANGE MASTER TO MASTER_HOST = ?, MASTER_PORT = ?, MASTER_USER = ?, MASTER_PASSWORD = ?, MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1",
      [primary.host, primary.port, primary.user, primary.password ?? ""],
    );
    await run(replica, "START SLAVE");
    const pair = makePair(primary, replica);
    await pair.waitForReplica();
    if (semiSync) await waitForSemiSync(primary);
    return pair;
  } catch (error) {
    await replica?.dispose().catch(() => {});
    await primary.dispose().catch(() => {});
    throw error;
  }
}

/** Waits until the primary counts the replica as a semi-synchronous client. */
async function waitForSemiSync(primary: MysqlHandle): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const rows = (await run(
      primary,
      "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'",
    )) as Array<{ Value: string }>;
    if (Number(rows[0]?.Value) >= 1) return;
    if (Date.now() > deadline) {
      throw new TestkitError(
        "TESTKIT_START_FAILED",
        "the replica did not connect to the primary as a semi-synchronous client within 30 s",
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function makePair(primary: MysqlHandle, replica: MysqlHandle): MysqlReplicaPair {
  return {
    primary,
    replica,
    async waitForReplica(timeoutMs = 30_000) {
      const rows = (await run(primary, "SELECT @@global.gtid_binlog_pos AS pos")) as Array<{
        pos: string;
      }>;
      const pos = rows[0]?.pos ?? "";
      if (pos === "") return;
      const waited = (await run(replica, "SELECT MASTER_GTID_WAIT(?, ?) AS r", [
        pos,
        timeoutMs / 1000,
      ])) as Array<{ r: number | string }>;
      if (Number(waited[0]?.r) !== 0) {
        const status = await run(replica, "SHOW SLAVE STATUS");
        throw new TestkitError(
          "TESTKIT_START_FAILED",
          `the replica did not reach the primary's position ${pos} within ${timeoutMs} ms: ${JSON.stringify(status)}`,
        );
      }
    },
    async pauseReplication() {
      await run(replica, "STOP SLAVE");
    },
    async resumeReplication() {
      await run(replica, "START SLAVE");
    },
    async promoteReplica() {
      await run(replica, "STOP SLAVE");
      await run(replica, "SET GLOBAL read_only = OFF");
    },
    query: run,
    async dispose() {
      await Promise.allSettled([replica.dispose(), primary.dispose()]);
    },
  };
}
