import { readdirSync, readFileSync } from "node:fs";
import { createConnection } from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type MysqlHandle,
  type MysqlReplicaPair,
  startMysql,
  startMysqlReplicaPair,
} from "../src/index";

describe("startMysql", () => {
  let mysql: MysqlHandle;

  beforeAll(async () => {
    mysql = await startMysql({ useEnv: false });
  });

  afterAll(async () => {
    await mysql.dispose();
  });

  async function query<T>(sql: string, database?: string): Promise<T[]> {
    const connection = await createConnection(mysql.connectionOptions(database));
    try {
      const [rows] = await connection.query(sql);
      return rows as T[];
    } finally {
      await connection.end();
    }
  }

  it("runs a private MariaDB that answers root without a password", async () => {
    expect(mysql.external).toBe(false);
    expect(mysql.url).toBe(`mysql://root@127.0.0.1:${mysql.port}/`);
    expect(mysql.connectionOptions()).toEqual({
      host: "127.0.0.1",
      port: mysql.port,
      user: "root",
    });
    const [row] = await query<{ version: string }>("SELECT VERSION() AS version");
    expect(row?.version).toMatch(/MariaDB/);
  });

  it("creates a new empty utf8mb4 database for each caller", async () => {
    const first = await mysql.createDatabase("ids");
    const second = await mysql.createDatabase("ids");
    expect(first).not.toBe(second);
    expect(first).toMatch(/^ids_/);
    expect(mysql.urlFor(first)).toBe(`mysql://root@127.0.0.1:${mysql.port}/${first}`);
    expect(mysql.connectionOptions(first).database).toBe(first);
    const tables = await query(`SHOW TABLES`, first);
    expect(tables).toEqual([]);
    const [charset] = await query<{ charset: string }>(
      "SELECT @@character_set_database AS charset",
      first,
    );
    expect(charset?.charset).toBe("utf8mb4");
  });

  it("keeps committed rows across kill() and start() on the same port", async () => {
    const database = await mysql.createDatabase();
    await query("CREATE TABLE alloc (biz_tag VARCHAR(128) PRIMARY KEY, max_id BIGINT)", database);
    await query("INSERT INTO alloc VALUES ('order', 4000)", database);
    const { port } = mysql;
    await mysql.kill();
    expect(mysql.running).toBe(false);
    await mysql.start();
    expect(mysql.port).toBe(port);
    const rows = await query<{ max_id: number }>("SELECT max_id FROM alloc", database);
    expect(rows.map((row) => Number(row.max_id))).toEqual([4000]);
  });

  it("pause() returns only once every thread of mariadbd has stopped (kill(2) only queues SIGSTOP)", () => {
    const pid = mysql.pid!;
    const running = () =>
      readdirSync(`/proc/${pid}/task`).filter((tid) => {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
        return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "T";
      });
    for (let round = 0; round < 30; round++) {
      mysql.pause();
      try {
        expect(running()).toEqual([]);
      } finally {
        mysql.resume();
      }
    }
  });

  it("times out queries while paused and answers again after resume()", async () => {
    const connection = await createConnection(mysql.connectionOptions());
    try {
      mysql.pause();
      try {
        await expect(connection.query({ sql: "SELECT 1", timeout: 300 })).rejects.toThrow(
          /timeout/i,
        );
      } finally {
        mysql.resume();
      }
    } finally {
      connection.destroy();
    }
    expect(await query("SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });

  it("restarts gracefully with its data", async () => {
    const database = await mysql.createDatabase();
    await query("CREATE TABLE marker (id INT)", database);
    await mysql.restart();
    expect(await query("SHOW TABLES", database)).toHaveLength(1);
  });
});

describe("startMysqlReplicaPair", () => {
  let pair: MysqlReplicaPair;

  beforeAll(async () => {
    pair = await startMysqlReplicaPair();
  });

  afterAll(async () => {
    await pair.dispose();
  });

  it("stops applying on pauseReplication() and catches up after resumeReplication()", async () => {
    const { primary, replica } = pair;
    const database = await primary.createDatabase("paused");
    await pair.query(primary, `CREATE TABLE ${database}.t (n BIGINT)`);
    await pair.waitForReplica();
    await pair.pauseReplication();
    await pair.query(primary, `INSERT INTO ${database}.t VALUES (1)`);
    await expect(pair.waitForReplica(1000)).rejects.toThrow(/did not reach/);
    expect(await pair.query(replica, `SELECT n FROM ${database}.t`)).toEqual([]);
    await pair.resumeReplication();
    await pair.waitForReplica();
    expect(await pair.query(replica, `SELECT n FROM ${database}.t`)).toEqual([{ n: "1" }]);
  });
});
