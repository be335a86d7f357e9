import { readdirSync, readFileSync } from "node:fs";
import { Client } from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  isExternal,
  type PostgresHandle,
  type PostgresReplicaPair,
  startPostgres,
  startPostgresReplicaPair,
  TestkitError,
} from "../src/index";

async function query<T>(
  server: PostgresHandle,
  sql: string,
  database?: string,
  values?: unknown[],
): Promise<T[]> {
  const client = new Client(server.connectionOptions(database));
  await client.connect();
  try {
    return (await client.query(sql, values)).rows as T[];
  } finally {
    await client.end();
  }
}

/** The field of /proc/{pid}/stat after the command name at `index` (0: state, 1: parent). */
function statField(pid: number | string, index: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[index];
  } catch {
    return undefined;
  }
}

/** The processes a process has started (PostgreSQL's backends, checkpointer, WAL writer...). */
function childrenOf(pid: number): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry) && Number(statField(entry, 1)) === pid)
    .map(Number);
}

/** Whether a process exists and has not exited. */
function alive(pid: number): boolean {
  const state = statField(pid, 0);
  return state !== undefined && state !== "Z";
}

/** The real uid of a process, from /proc. */
function uidOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
}

describe("startPostgres", () => {
  let postgres: PostgresHandle;

  beforeAll(async () => {
    postgres = await startPostgres({ useEnv: false });
  });

  afterAll(async () => {
    await postgres.dispose();
  });

  it("runs a private PostgreSQL that answers the superuser postgres without a password", async () => {
    expect(postgres.external).toBe(false);
    expect(postgres.kind).toBe("postgres");
    expect(postgres.url).toBe(`postgres://postgres@127.0.0.1:${postgres.port}/postgres`);
    expect(postgres.connectionOptions()).toEqual({
      host: "127.0.0.1",
      port: postgres.port,
      user: "postgres",
      database: "postgres",
    });
    const [row] = await query<{ version: string; super: string }>(
      postgres,
      "SELECT version(), current_setting('is_superuser') AS super",
    );
    expect(row?.version).toMatch(/^PostgreSQL \d+/);
    expect(row?.super).toBe("on");
  });

  it("runs the server as an unprivileged user, and its pid is the postmaster's", () => {
    const pid = postgres.pid!;
    expect(readFileSync(`/proc/${pid}/comm`, "utf8").trim()).toBe("postgres");
    // The postmaster is the parent of the server's other processes.
    expect(childrenOf(pid).length).toBeGreaterThan(0);
    expect(uidOf(pid)).not.toBe(0);
    if (process.getuid?.() !== 0) expect(uidOf(pid)).toBe(process.getuid?.());
  });

  it("creates a new empty UTF8 database for each caller", async () => {
    const first = await postgres.createDatabase("Ids");
    const second = await postgres.createDatabase("Ids");
    expect(first).not.toBe(second);
    expect(first).toMatch(/^ids_[a-z0-9_]+$/);
    expect(postgres.urlFor(first)).toBe(`postgres://postgres@127.0.0.1:${postgres.port}/${first}`);
    expect(postgres.connectionOptions(first).database).toBe(first);
    const tables = await query(
      postgres,
      "SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
      first,
    );
    expect(tables).toEqual([]);
    const [encoding] = await query<{ encoding: string }>(
      postgres,
      "SELECT pg_encoding_to_char(encoding) AS encoding FROM pg_database WHERE datname = current_database()",
      first,
    );
    expect(encoding?.encoding).toBe("UTF8");
  });

  it("keeps committed rows across kill() and start() on the same port", async () => {
    const database = await postgres.createDatabase();
    await query(postgres, "CREATE TABLE alloc (biz_tag text PRIMARY KEY, max_id bigint)", database);
    await query(postgres, "INSERT INTO alloc VALUES ('order', 9007199254740993)", database);
    const { port } = postgres;
    const idle = new Client(postgres.connectionOptions(database));
    idle.on("error", () => {});
    await idle.connect();
    const processes = childrenOf(postgres.pid!);
    await postgres.kill();
    expect(postgres.running).toBe(false);
    // SIGKILL reached the whole server, also the backends that left the postmaster's group.
    expect(processes.filter(alive)).toEqual([]);
    await idle.end().catch(() => {});
    await postgres.start();
    expect(postgres.port).toBe(port);
    const rows = await query<{ max_id: string }>(postgres, "SELECT max_id FROM alloc", database);
    expect(rows).toEqual([{ max_id: "9007199254740993" }]);
  });

  it("pause() returns only once every process of the server has stopped (its backends leave its group)", () => {
    const pid = postgres.pid!;
    const members = [pid, ...childrenOf(pid)];
    expect(members.length).toBeGreaterThan(1);
    const running = () => members.filter((member) => alive(member) && statField(member, 0) !== "T");
    for (let round = 0; round < 10; round++) {
      postgres.pause();
      try {
        expect(running()).toEqual([]);
      } finally {
        postgres.resume();
      }
    }
  });

  it("times out queries while paused and answers again after resume()", async () => {
    const client = new Client({ ...postgres.connectionOptions(), query_timeout: 300 });
    client.on("error", () => {});
    await client.connect();
    try {
      postgres.pause();
      try {
        await expect(client.query("SELECT 1")).rejects.toThrow(/timeout/i);
      } finally {
        postgres.resume();
      }
    } finally {
      await client.end().catch(() => {});
    }
    expect(await query(postgres, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });

  it("restarts gracefully with its data", async () => {
    const database = await postgres.createDatabase();
    await query(postgres, "CREATE TABLE marker (id int)", database);
    const before = postgres.pid;
    await postgres.restart();
    expect(postgres.pid).not.toBe(before);
    const tables = await query(
      postgres,
      "SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
      database,
    );
    expect(tables).toEqual([{ tablename: "marker" }]);
  });
});

describe("startPostgres({ checkPasswords: true })", () => {
  let postgres: PostgresHandle;

  beforeAll(async () => {
    postgres = await startPostgres({ checkPasswords: true });
    await query(postgres, "CREATE ROLE kit_pw LOGIN PASSWORD 'right'");
  });

  afterAll(async () => {
    await postgres?.dispose();
  });

  const loginAs = async (password: string | undefined) => {
    const client = new Client({
      ...postgres.connectionOptions(),
      user: "kit_pw",
      ...(password === undefined ? {} : { password }),
    });
    client.on("error", () => {});
    try {
      await client.connect();
      return (await client.query<{ who: string }>("SELECT current_user AS who")).rows[0]?.who;
    } catch (error) {
      return (error as { code?: string }).code;
    } finally {
      await client.end().catch(() => {});
    }
  };

  it("refuses a role's wrong password (28P01), takes the right one, and lets the superuser in without one", async () => {
    expect(postgres.external).toBe(false);
    expect(await loginAs("wrong")).toBe("28P01");
    expect(await loginAs("right")).toBe("kit_pw");
    const [row] = await query<{ who: string }>(postgres, "SELECT current_user AS who");
    expect(row?.who).toBe("postgres");
  });
});

describe("LEAF_TEST_PG_URL", () => {
  const saved = process.env.LEAF_TEST_PG_URL;
  let real: PostgresHandle;

  beforeAll(async () => {
    real = await startPostgres({ useEnv: false });
  });

  afterEach(() => {
    if (saved === undefined) delete process.env.LEAF_TEST_PG_URL;
    else process.env.LEAF_TEST_PG_URL = saved;
  });

  afterAll(async () => {
    await real.dispose();
  });

  it("makes startPostgres() use that server, whose fault methods refuse, and drops its databases on dispose", async () => {
    process.env.LEAF_TEST_PG_URL = `postgresql://postgres@127.0.0.1:${real.port}/postgres`;
    expect(isExternal("postgres")).toBe(true);
    const postgres = await startPostgres();
    expect(postgres).toMatchObject({
      external: true,
      kind: "postgres",
      port: real.port,
      url: real.url,
      pid: undefined,
    });
    expect(() => postgres.pause()).toThrow(
      "[leaf] [testkit] cannot pause an external server (LEAF_TEST_PG_URL)",
    );
    const database = await postgres.createDatabase("shared");
    const listed = () =>
      query<{ datname: string }>(
        real,
        "SELECT datname FROM pg_database WHERE datname = $1",
        undefined,
        [database],
      );
    expect(await listed()).toEqual([{ datname: database }]);
    await postgres.dispose();
    expect(await listed()).toEqual([]);
  });

  it("refuses a value that is not a postgres URL, naming the variable", async () => {
    process.env.LEAF_TEST_PG_URL = "mysql://root@127.0.0.1:3306/";
    await expect(startPostgres()).rejects.toThrow(
      "[leaf] [testkit] LEAF_TEST_PG_URL=mysql://root@127.0.0.1:3306/: expected a postgres:// URL",
    );
    await expect(startPostgres()).rejects.toBeInstanceOf(TestkitError);
  });
});

describe("startPostgresReplicaPair", () => {
  let pair: PostgresReplicaPair;

  beforeAll(async () => {
    pair = await startPostgresReplicaPair();
  });

  afterAll(async () => {
    await pair.dispose();
  });

  it("streams the primary's writes to a read-only standby", async () => {
    const { primary, replica } = pair;
    expect(await pair.query(primary, "SELECT pg_is_in_recovery() AS standby")).toEqual([
      { standby: false },
    ]);
    expect(await pair.query(replica, "SELECT pg_is_in_recovery() AS standby")).toEqual([
      { standby: true },
    ]);
    const database = await primary.createDatabase("replicated");
    await pair.query(primary, "CREATE TABLE t (n bigint)", [], database);
    await pair.query(primary, "INSERT INTO t VALUES (1)", [], database);
    await pair.waitForReplica();
    expect(await pair.query(replica, "SELECT n FROM t", [], database)).toEqual([{ n: "1" }]);
    await expect(pair.query(replica, "INSERT INTO t VALUES (2)", [], database)).rejects.toThrow(
      /read-only transaction/,
    );
  });

  it("stops applying on pauseReplication() and catches up after resumeReplication()", async () => {
    const { primary, replica } = pair;
    const database = await primary.createDatabase("paused");
    await pair.query(primary, "CREATE TABLE t (n bigint)", [], database);
    await pair.waitForReplica();
    await pair.pauseReplication();
    await pair.query(primary, "INSERT INTO t VALUES (1)", [], database);
    await expect(pair.waitForReplica(500)).rejects.toThrow(/did not replay/);
    expect(await pair.query(replica, "SELECT n FROM t", [], database)).toEqual([]);
    await pair.resumeReplication();
    await pair.waitForReplica();
    expect(await pair.query(replica, "SELECT n FROM t", [], database)).toEqual([{ n: "1" }]);
    expect(await pair.query(replica, "SELECT pg_is_in_recovery() AS standby")).toEqual([
      { standby: true },
    ]);
  });

  it("promotes a replica that missed writes, and the old primary comes back writable beside it", async () => {
    const { primary, replica } = pair;
    const database = await primary.createDatabase("failover");
    await pair.query(primary, "CREATE TABLE t (n bigint)", [], database);
    await pair.query(primary, "INSERT INTO t VALUES (1)", [], database);
    await pair.waitForReplica();
    await pair.pauseReplication();
    await pair.query(primary, "INSERT INTO t VALUES (2)", [], database);

    await primary.kill();
    await pair.promoteReplica();
    expect(await pair.query(replica, "SELECT pg_is_in_recovery() AS standby")).toEqual([
      { standby: false },
    ]);
    // The write after the replication stopped is missing on the promoted replica.
    expect(await pair.query(replica, "SELECT n FROM t ORDER BY n", [], database)).toEqual([
      { n: "1" },
    ]);
    await pair.query(replica, "INSERT INTO t VALUES (3)", [], database);

    // Split brain: the old primary restarts as a primary with its own history.
    await primary.start();
    await pair.query(primary, "INSERT INTO t VALUES (4)", [], database);
    expect(await pair.query(primary, "SELECT n FROM t ORDER BY n", [], database)).toEqual([
      { n: "1" },
      { n: "2" },
      { n: "4" },
    ]);

    // The promotion outlives a restart.
    await replica.restart();
    expect(await pair.query(replica, "SELECT pg_is_in_recovery() AS standby")).toEqual([
      { standby: false },
    ]);
    expect(await pair.query(replica, "SELECT n FROM t ORDER BY n", [], database)).toEqual([
      { n: "1" },
      { n: "3" },
    ]);
  });
});

describe("startPostgres without the programs", () => {
  it("names the missing program and the ways out", async () => {
    await expect(startPostgres({ useEnv: false, binDir: "/nonexistent/bin" })).rejects.toThrow(
      /postgres server: \/nonexistent\/bin\/postgres not found.*install-services\.sh.*LEAF_TEST_PG_URL=/,
    );
  });
});
