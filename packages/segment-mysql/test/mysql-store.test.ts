import { readFileSync } from "node:fs";
import { join } from "node:path";
import { segmentStoreConformance } from "@leaf/conformance/segment-store";
import { ErrorCodes, isLeafError } from "@leaf/core";
import { SegmentIdGenerator } from "@leaf/segment";
import { type MysqlHandle, startMysql } from "@leaf/testkit";
import mysql from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it, test } from "vitest";
import { createSchema, LEAF_ALLOC_SCHEMA, MysqlSegmentStore } from "../src/index";

let db: MysqlHandle;
let database: string;

beforeAll(async () => {
  // A private server: one test switches it to read-only.
  db = await startMysql({ useEnv: false });
  database = await db.createDatabase("segment_store");
});

afterAll(async () => {
  await db?.dispose();
});

segmentStoreConformance(test, {
  name: "mysql store",
  async create({ namespace }) {
    const store = new MysqlSegmentStore({ url: db.urlFor(database), table: namespace });
    await store.createSchema();
    return store;
  },
  concurrentInstances: true,
  giveBack: true,
  floor: true,
  async editRow({ namespace }, tag, row) {
    const conn = await mysql.createConnection(db.connectionOptions(database));
    try {
      if (row.maxId !== undefined)
        await conn.query(`UPDATE ${namespace} SET max_id = ? WHERE biz_tag = ?`, [row.maxId, tag]);
      if (row.step !== undefined)
        await conn.query(`UPDATE ${namespace} SET step = ? WHERE biz_tag = ?`, [row.step, tag]);
    } finally {
      await conn.end();
    }
  },
});

describe("MysqlSegmentStore", () => {
  it("creates Java Leaf's leaf_alloc table column for column", async () => {
    await createSchema({ url: db.urlFor(database) });
    await createSchema({ url: db.urlFor(database) });
    const conn = await mysql.createConnection(db.connectionOptions(database));
    try {
      const [columns] = await conn.query<mysql.RowDataPacket[]>(
        "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, COLUMN_KEY, EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'leaf_alloc' ORDER BY ORDINAL_POSITION",
        [database],
      );
      expect(
        columns.map((c) => [c.COLUMN_NAME, c.COLUMN_TYPE, c.IS_NULLABLE, c.COLUMN_KEY]),
      ).toEqual([
        ["biz_tag", "varchar(128)", "NO", "PRI"],
        ["max_id", "bigint(20)", "NO", ""],
        ["step", "int(11)", "NO", ""],
        ["description", "varchar(256)", "YES", ""],
        ["update_time", "timestamp", "NO", ""],
      ]);
      expect(String(columns[1]?.COLUMN_DEFAULT)).toMatch(/^'?1'?$/);
      expect(String(columns[4]?.EXTRA).toLowerCase()).toContain("on update current_timestamp");
    } finally {
      await conn.end();
    }
    expect(LEAF_ALLOC_SCHEMA).toContain("CREATE TABLE IF NOT EXISTS `leaf_alloc`");
    const shipped = readFileSync(join(import.meta.dirname, "..", "sql", "leaf_alloc.sql"), "utf8");
    expect(shipped).toContain(`${LEAF_ALLOC_SCHEMA};\n`);
  });

  it("takes ranges from a table filled the way Java Leaf users fill it", async () => {
    const table = "leaf_alloc_java";
    const store = new MysqlSegmentStore({ url: db.urlFor(database), table });
    try {
      await store.createSchema();
      const conn = await mysql.createConnection(db.connectionOptions(database));
      await conn.query(
        `INSERT INTO ${table}(biz_tag, max_id, step, description) VALUES('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')`,
      );
      await conn.end();
      const range = await store.takeRange("leaf-segment-test");
      expect([range.start, range.end, range.step]).toEqual([1n, 2001n, 2000]);
      const [record] = await store.describeTags();
      expect(record).toMatchObject({
        tag: "leaf-segment-test",
        maxId: 2001n,
        description: "Test leaf Segment Mode Get Id",
      });
    } finally {
      await store.close();
    }
  });

  it("reads a JDBC URL with user and password given apart, as leaf.properties has them", async () => {
    const store = new MysqlSegmentStore({
      url: `jdbc:mysql://127.0.0.1:${db.port}/${database}?useUnicode=true&characterEncoding=utf8`,
      user: db.user,
      password: db.password,
      table: "leaf_alloc_jdbc",
    });
    try {
      await store.createSchema();
      await store.createTag({ tag: "jdbc", step: 10 });
      expect(await store.listTags()).toEqual(["jdbc"]);
    } finally {
      await store.close();
    }
  });

  it("counts one round trip per range taken", async () => {
    const store = new MysqlSegmentStore({ url: db.urlFor(database), table: "leaf_alloc_trips" });
    try {
      await store.createSchema();
      await store.createTag({ tag: "t", step: 10 });
      const before = store.stats().roundTrips;
      for (let i = 0; i < 5; i++) await store.takeRange("t");
      expect(store.stats().roundTrips - before).toBe(5);
      expect(store.stats().rangesTaken).toBe(5);
    } finally {
      await store.close();
    }
  });

  it("moves to the next host when the first cannot be reached, and stays there", async () => {
    const deadPort = db.port === 1 ? 2 : 1;
    const store = new MysqlSegmentStore({
      url: `mysql://${db.user}@127.0.0.1:${deadPort},127.0.0.1:${db.port}/${database}`,
      table: "leaf_alloc_failover",
      connectTimeoutMs: 2_000,
    });
    try {
      await store.createSchema();
      await store.createTag({ tag: "t", step: 10, startId: 0n });
      const ranges = [await store.takeRange("t"), await store.takeRange("t")];
      expect(ranges.map((r) => r.start)).toEqual([0n, 10n]);
      expect(store.stats()).toMatchObject({ currentHost: 1, failovers: 1 });
    } finally {
      await store.close();
    }
  });

  it("skips a read-only server (a replica) in the host list and takes ranges from the writable one", async () => {
    const replica = await startMysql({ useEnv: false });
    const table = "leaf_alloc_replica";
    try {
      const replicaDb = await replica.createDatabase("segment_store");
      for (const handle of [replica, db]) {
        const store = new MysqlSegmentStore({
          url: handle.urlFor(handle === db ? database : replicaDb),
          table,
        });
        await store.createSchema();
        await store.createTag({ tag: "t", step: 10, startId: handle === db ? 0n : 5_000n });
        await store.close();
      }
      const conn = await mysql.createConnection(replica.connectionOptions(replicaDb));
      await conn.query("SET GLOBAL read_only = 1");
      const store = new MysqlSegmentStore({
        hosts: [
          { host: replica.host, port: replica.port },
          { host: db.host, port: db.port },
        ],
        user: db.user,
        database,
        table,
      });
      try {
        expect((await store.takeRange("t")).start).toBe(0n);
        expect((await store.takeRange("t")).start).toBe(10n);
        expect(store.stats()).toMatchObject({ currentHost: 1, failovers: 1 });
        const [rows] = await conn.query<mysql.RowDataPacket[]>(`SELECT max_id FROM ${table}`);
        expect(rows[0]).toMatchObject({ max_id: 5000 });
      } finally {
        await store.close();
        await conn.end();
      }
    } finally {
      await replica.dispose();
    }
  });

  it("never takes a range from a read-only server, even as a user with SUPER", async () => {
    const table = "leaf_alloc_readonly";
    const store = new MysqlSegmentStore({ url: db.urlFor(database), table });
    const conn = await mysql.createConnection(db.connectionOptions(database));
    try {
      await store.createSchema();
      await store.createTag({ tag: "t", step: 10, startId: 0n });
      await conn.query("SET GLOBAL read_only = 1");
      await expect(store.takeRange("t")).rejects.toSatisfy(
        (e: unknown) =>
          isLeafError(e, ErrorCodes.UNAVAILABLE) && /read-only/.test((e as Error).message),
      );
      await expect(store.createTag({ tag: "u", step: 1 })).rejects.toSatisfy((e: unknown) =>
        isLeafError(e, ErrorCodes.UNAVAILABLE),
      );
      await expect(store.updateStep("t", 5)).rejects.toSatisfy((e: unknown) =>
        isLeafError(e, ErrorCodes.UNAVAILABLE),
      );
      const [rows] = await conn.query<mysql.RowDataPacket[]>(
        `SELECT max_id, step FROM ${table} WHERE biz_tag = 't'`,
      );
      expect(rows[0]).toMatchObject({ max_id: 0, step: 10 });
      await conn.query("SET GLOBAL read_only = 0");
      expect((await store.takeRange("t")).start).toBe(0n);
    } finally {
      await conn.query("SET GLOBAL read_only = 0");
      await conn.end();
      await store.close();
    }
  });

  it("says the table is missing and how to create it", async () => {
    const store = new MysqlSegmentStore({ url: db.urlFor(database), table: "no_such_table" });
    try {
      await expect(store.takeRange("t")).rejects.toSatisfy(
        (e: unknown) =>
          isLeafError(e, ErrorCodes.INVALID_CONFIG) && /createSchema/.test((e as Error).message),
      );
    } finally {
      await store.close();
    }
  });

  it("reports a grant revoked while serving as a configuration problem at error level, not as a store that may be down", async () => {
    const table = "leaf_alloc_revoked";
    const root = await mysql.createConnection(db.connectionOptions(database));
    const owner = new MysqlSegmentStore({ url: db.urlFor(database), table });
    const reported: Array<{ level?: string; code?: string }> = [];
    let generator: SegmentIdGenerator | undefined;
    try {
      await owner.createSchema();
      await owner.createTag({ tag: "revoked", step: 10 });
      await root.query(`CREATE USER IF NOT EXISTS 'seg_revoked'@'%' IDENTIFIED BY 'pw'`);
      await root.query(`GRANT SELECT, UPDATE ON \`${database}\`.\`${table}\` TO 'seg_revoked'@'%'`);
      const store = new MysqlSegmentStore({
        hosts: [{ host: db.host, port: db.port }],
        user: "seg_revoked",
        password: "pw",
        database,
        table,
      });
      generator = new SegmentIdGenerator({
        store,
        dynamicStep: false,
        exhaustedWaitMs: 200,
        onError: (error, context) =>
          reported.push({ level: context.level, code: (error as { code?: string }).code }),
      });
      await generator.start();
      expect(await generator.nextId("revoked")).toBe(1n);
      await root.query(`REVOKE UPDATE ON \`${database}\`.\`${table}\` FROM 'seg_revoked'@'%'`);
      // Use up both ranges: the next load is refused for want of UPDATE.
      let refusal: unknown;
      for (let i = 0; i < 40 && refusal === undefined; i++) {
        await generator.nextId("revoked").catch((e: unknown) => {
          refusal = e;
        });
      }
      expect(isLeafError(refusal, ErrorCodes.SEGMENTS_EXHAUSTED)).toBe(true);
      expect((refusal as Error).message).toContain("a configuration problem, not an outage");
      expect(reported.some((r) => r.level === "error" && r.code === "INVALID_CONFIG")).toBe(true);
    } finally {
      await generator?.close();
      await owner.close();
      await root.query("DROP USER IF EXISTS 'seg_revoked'@'%'");
      await root.end();
    }
  });

  it("checkAccess() refuses a user without UPDATE with INVALID_CONFIG naming the privilege and the table, and passes one with it", async () => {
    const table = "leaf_alloc_grants";
    const root = await mysql.createConnection(db.connectionOptions(database));
    const owner = new MysqlSegmentStore({ url: db.urlFor(database), table });
    try {
      await owner.createSchema();
      for (const [user, grants] of [
        ["seg_select", "SELECT"],
        ["seg_update", "SELECT, UPDATE"],
      ] as const) {
        await root.query(`CREATE USER IF NOT EXISTS '${user}'@'%' IDENTIFIED BY 'pw'`);
        await root.query(`GRANT ${grants} ON \`${database}\`.\`${table}\` TO '${user}'@'%'`);
      }
      const as = (user: string) =>
        new MysqlSegmentStore({
          hosts: [{ host: db.host, port: db.port }],
          user,
          password: "pw",
          database,
          table,
        });
      const selectOnly = as("seg_select");
      const error = await selectOnly.checkAccess().then(
        () => undefined,
        (e: unknown) => e,
      );
      await selectOnly.close();
      expect(isLeafError(error, ErrorCodes.INVALID_CONFIG)).toBe(true);
      expect((error as Error).message).toContain(
        `the user may not UPDATE on table ${database}.${table}`,
      );
      expect((error as Error).message).toContain(`GRANT UPDATE ON ${database}.${table}`);
      expect((error as { details: { mysql: string } }).details.mysql).toBe("access");
      const updater = as("seg_update");
      await expect(updater.checkAccess()).resolves.toBeUndefined();
      await updater.close();
      // The no-op UPDATE changed nothing.
      expect(await owner.listTags()).toEqual([]);
    } finally {
      await owner.close();
      await root.end();
    }
  });

  it("checkAccess() refuses a read-only server for a user without SUPER, and a wrong password as access denied", async () => {
    const table = "leaf_alloc_ro_check";
    const root = await mysql.createConnection(db.connectionOptions(database));
    const owner = new MysqlSegmentStore({ url: db.urlFor(database), table });
    const store = new MysqlSegmentStore({
      hosts: [{ host: db.host, port: db.port }],
      user: "seg_ro_check",
      password: "pw",
      database,
      table,
    });
    const wrong = new MysqlSegmentStore({
      hosts: [{ host: db.host, port: db.port }],
      user: "seg_ro_check",
      password: "not-the-password",
      database,
      table,
    });
    try {
      await owner.createSchema();
      await root.query("CREATE USER IF NOT EXISTS 'seg_ro_check'@'%' IDENTIFIED BY 'pw'");
      await root.query(`GRANT SELECT, UPDATE ON \`${database}\`.* TO 'seg_ro_check'@'%'`);
      await root.query("SET GLOBAL read_only = ON");
      await expect(store.checkAccess()).rejects.toSatisfy(
        (e: unknown) =>
          isLeafError(e, ErrorCodes.UNAVAILABLE) &&
          (e as Error).message.includes(`the server on ${db.host}:${db.port} is read-only`),
      );
      await root.query("SET GLOBAL read_only = OFF");
      await expect(store.checkAccess()).resolves.toBeUndefined();
      const denied = await wrong.checkAccess().then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(isLeafError(denied, ErrorCodes.INVALID_CONFIG)).toBe(true);
      expect(denied!.message).toMatch(/access denied on .*Access denied for user 'seg_ro_check'/);
      expect(denied!.message).toContain("check the user and password");
      expect(denied!.message.split(`${db.host}:${db.port}`).length - 1).toBe(1);
    } finally {
      await root.query("SET GLOBAL read_only = OFF");
      await root.end();
      await Promise.all([owner.close(), store.close(), wrong.close()]);
    }
  });

  it("answers UNAVAILABLE naming the host when no server answers", async () => {
    const store = new MysqlSegmentStore({
      url: `mysql://root@127.0.0.1:1/${database}`,
      connectTimeoutMs: 1_000,
    });
    try {
      await expect(store.listTags()).rejects.toSatisfy(
        (e: unknown) =>
          isLeafError(e, ErrorCodes.UNAVAILABLE) && (e as Error).message.includes("127.0.0.1:1"),
      );
    } finally {
      await store.close();
    }
  });

  it("refuses bad options with INVALID_CONFIG naming the key", () => {
    const config = (fn: () => unknown, key: string) =>
      expect(fn).toThrow(
        expect.objectContaining({
          code: ErrorCodes.INVALID_CONFIG,
          details: expect.objectContaining({ key }),
        }),
      );
    config(() => new MysqlSegmentStore({ url: "postgres://x/y" }), "url");
    config(() => new MysqlSegmentStore({ url: "mysql://h:99999/db" }), "url");
    config(() => new MysqlSegmentStore({ url: "mysql://h:3306" }), "database");
    config(() => new MysqlSegmentStore({ url: "mysql://h/db", table: "leaf; DROP" }), "table");
    config(
      () => new MysqlSegmentStore({ url: "mysql://h/db", connectionLimit: 0 }),
      "connectionLimit",
    );
    config(() => new MysqlSegmentStore({ hosts: [] }), "url");
  });
});
