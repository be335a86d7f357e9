import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  segmentStoreConformance,
  segmentStoreDurabilityConformance,
} from "@leaf/conformance/segment-store";
import { ErrorCodes, isLeafError } from "@leaf/core";
import { type PostgresHandle, startPostgres, startPostgresReplicaPair } from "@leaf/testkit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, test } from "vitest";
import { createSchema, LEAF_ALLOC_SCHEMA, PostgresSegmentStore } from "../src/index";

let db: PostgresHandle;
let database: string;

beforeAll(async () => {
  // A private server: tests switch it to read-only.
  db = await startPostgres({ useEnv: false });
  database = await db.createDatabase("segment_store");
}, 120_000);

afterAll(async () => {
  await db?.dispose();
});

/** Runs statements on one short-lived connection as the superuser; the last one's rows. */
async function admin<T = Record<string, unknown>>(
  sql: string[],
  values: unknown[][] = [],
  on: PostgresHandle = db,
  dbName: string = database,
): Promise<T[]> {
  const client = new pg.Client(on.connectionOptions(dbName));
  await client.connect();
  try {
    let rows: T[] = [];
    for (const [i, text] of sql.entries()) rows = (await client.query(text, values[i])).rows;
    return rows;
  } finally {
    await client.end();
  }
}

/**
 * Makes the whole server refuse writes in every session, open ones included
 * (`default_transaction_read_only` in postgresql.auto.conf, reloaded), or lifts it; resolves once
 * a new session sees the setting.
 */
async function serverReadOnly(on: boolean): Promise<void> {
  await admin([
    // This session may still write whatever the server's setting.
    "SET default_transaction_read_only = off",
    on
      ? "ALTER SYSTEM SET default_transaction_read_only = on"
      : "ALTER SYSTEM RESET default_transaction_read_only",
    "SELECT pg_reload_conf()",
  ]);
  for (let i = 0; i < 200; i++) {
    const [row] = await admin<{ ro: string }>([
      "SELECT current_setting('default_transaction_read_only') AS ro",
    ]);
    if (row?.ro === (on ? "on" : "off")) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`default_transaction_read_only did not become ${on ? "on" : "off"}`);
}

segmentStoreConformance(test, {
  name: "postgres store",
  async create({ namespace }) {
    const store = new PostgresSegmentStore({ url: db.urlFor(database), table: namespace });
    await store.createSchema();
    return store;
  },
  concurrentInstances: true,
  giveBack: true,
  floor: true,
  async editRow({ namespace }, tag, row) {
    if (row.maxId !== undefined) {
      await admin([`UPDATE ${namespace} SET max_id = $1 WHERE biz_tag = $2`], [[row.maxId, tag]]);
    }
    if (row.step !== undefined) {
      await admin([`UPDATE ${namespace} SET step = $1 WHERE biz_tag = $2`], [[row.step, tag]]);
    }
  },
});

segmentStoreDurabilityConformance(test, {
  name: "postgres store",
  async create({ namespace }) {
    const store = new PostgresSegmentStore({ url: db.urlFor(database), table: namespace });
    await store.createSchema();
    return store;
  },
  // The server stops taking writes in every session, the store's open connections included.
  async induceWriteFault() {
    await serverReadOnly(true);
    return { end: () => serverReadOnly(false) };
  },
});

describe("PostgresSegmentStore", () => {
  it("creates the leaf_alloc table with Leaf's columns, and ships the same statement", async () => {
    await createSchema({ url: db.urlFor(database) });
    await createSchema({ url: db.urlFor(database) });
    const columns = await admin<Record<string, string>>([
      "SELECT column_name, data_type, character_maximum_length::text AS length, is_nullable, column_default FROM information_schema.columns WHERE table_name = 'leaf_alloc' ORDER BY ordinal_position",
    ]);
    expect(columns.map((c) => [c.column_name, c.data_type, c.length, c.is_nullable])).toEqual([
      ["biz_tag", "character varying", "128", "NO"],
      ["max_id", "bigint", null, "NO"],
      ["step", "integer", null, "NO"],
      ["description", "character varying", "256", "YES"],
      ["update_time", "timestamp with time zone", null, "NO"],
    ]);
    expect(columns[1]?.column_default).toBe("1");
    const [key] = await admin<{ column_name: string }>([
      "SELECT a.attname AS column_name FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'leaf_alloc'::regclass AND i.indisprimary",
    ]);
    expect(key?.column_name).toBe("biz_tag");
    const shipped = readFileSync(join(import.meta.dirname, "..", "sql", "leaf_alloc.sql"), "utf8");
    expect(shipped).toContain(`${LEAF_ALLOC_SCHEMA};\n`);
  });

  it("creates its tables from several processes at once on an empty database: none fails", async () => {
    // PostgreSQL checks IF NOT EXISTS before it writes the catalog: two sessions creating the
    // tables together failed on a duplicate key in pg_type (a server's worker processes started
    // on an empty database with createTable), unless they wait for each other.
    const failed: string[] = [];
    const rounds = 20;
    for (let round = 0; round < rounds; round++) {
      const url = db.urlFor(await db.createDatabase("segment_race"));
      const stores = [0, 1].map(() => new PostgresSegmentStore({ url }));
      const results = await Promise.allSettled([
        createSchema({ url }),
        ...stores.map((s) => s.createSchema()),
      ]);
      await Promise.all(stores.map((s) => s.close()));
      for (const r of results) if (r.status === "rejected") failed.push(String(r.reason));
    }
    expect(failed, `${failed.length} of ${rounds * 3} failed`).toEqual([]);
  }, 60_000);

  it("takes ranges from a table filled by hand, as Java Leaf's users fill theirs", async () => {
    const table = "leaf_alloc_java";
    const store = new PostgresSegmentStore({ url: db.urlFor(database), table });
    try {
      await store.createSchema();
      await admin([
        `INSERT INTO ${table}(biz_tag, max_id, step, description) VALUES('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')`,
      ]);
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

  it("reads max ids exact near 2^63 even when the application parses int8 as a JS number", async () => {
    const table = "leaf_alloc_int8";
    // An application-wide parser that rounds int8 through a number: the store must not depend on it.
    const before = pg.types.getTypeParser(20, "text");
    pg.types.setTypeParser(20, (value: string) => Number(value));
    const store = new PostgresSegmentStore({ url: db.urlFor(database), table });
    try {
      await store.createSchema();
      const start = 9_223_372_036_854_770_001n;
      await store.createTag({ tag: "big", step: 1000, startId: start });
      const range = await store.takeRange("big");
      expect([range.start, range.end]).toEqual([start, start + 1000n]);
      const [record] = await store.describeTags();
      expect(record?.maxId).toBe(start + 1000n);
      // 2^63 - 1 - 9223372036854771001 = 4806 ids are left: a range of 5000 is refused, unchanged.
      await expect(store.takeRange("big", 5000)).rejects.toSatisfy((e: unknown) =>
        isLeafError(e, ErrorCodes.TAG_EXHAUSTED),
      );
      expect((await store.takeRange("big", 4806)).end).toBe((1n << 63n) - 1n);
    } finally {
      pg.types.setTypeParser(20, before);
      await store.close();
    }
  });

  it("takes a range in one statement: one round trip each", async () => {
    const store = new PostgresSegmentStore({ url: db.urlFor(database), table: "leaf_alloc_trips" });
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
    const store = new PostgresSegmentStore({
      url: `postgres://${db.user}@127.0.0.1:${deadPort},127.0.0.1:${db.port}/${database}`,
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

  it("skips a hot standby listed first and takes ranges from the primary, never writing to the standby", async () => {
    const pair = await startPostgresReplicaPair();
    try {
      const { primary, replica } = pair;
      const dbName = await primary.createDatabase("standby_first");
      const setup = new PostgresSegmentStore({ url: primary.urlFor(dbName) });
      await setup.createSchema();
      await setup.createTag({ tag: "t", step: 10, startId: 0n });
      await setup.close();
      await pair.waitForReplica();
      const store = new PostgresSegmentStore({
        hosts: [
          { host: replica.host, port: replica.port },
          { host: primary.host, port: primary.port },
        ],
        user: primary.user,
        database: dbName,
      });
      try {
        expect((await store.takeRange("t")).start).toBe(0n);
        expect((await store.takeRange("t")).start).toBe(10n);
        // The standby is not writable: no split brain, and the store stays on the primary.
        expect(store.stats()).toMatchObject({
          currentHost: 1,
          failovers: 1,
          splitBrainRefusals: 0,
        });
        await expect(store.checkAccess()).resolves.toBeUndefined();
      } finally {
        await store.close();
      }
    } finally {
      await pair.dispose();
    }
  }, 180_000);

  it("never takes a range from a read-only server, even as the superuser", async () => {
    const table = "leaf_alloc_readonly";
    const store = new PostgresSegmentStore({ url: db.urlFor(database), table });
    try {
      await store.createSchema();
      await store.createTag({ tag: "t", step: 10, startId: 0n });
      await serverReadOnly(true);
      await expect(store.takeRange("t")).rejects.toSatisfy(
        (e: unknown) =>
          isLeafError(e, ErrorCodes.UNAVAILABLE) && /read-only/.test((e as Error).message),
      );
      for (const write of [
        () => store.createTag({ tag: "u", step: 1 }),
        () => store.updateStep("t", 5),
        () => store.deleteTag("t"),
        () => store.checkAccess(),
      ]) {
        await expect(write()).rejects.toSatisfy((e: unknown) =>
          isLeafError(e, ErrorCodes.UNAVAILABLE),
        );
      }
      const rows = await admin<{ max_id: string; step: number }>([
        `SELECT max_id::text AS max_id, step FROM ${table} WHERE biz_tag = 't'`,
      ]);
      expect(rows).toEqual([{ max_id: "0", step: 10 }]);
      await serverReadOnly(false);
      expect((await store.takeRange("t")).start).toBe(0n);
    } finally {
      await serverReadOnly(false);
      await store.close();
    }
  });

  it("says the table is missing and how to create it", async () => {
    const store = new PostgresSegmentStore({ url: db.urlFor(database), table: "no_such_table" });
    try {
      await expect(store.takeRange("t")).rejects.toSatisfy(
        (e: unknown) =>
          isLeafError(e, ErrorCodes.INVALID_CONFIG) &&
          /missing table.*createSchema/.test((e as Error).message),
      );
    } finally {
      await store.close();
    }
  });

  it("checkAccess() refuses a role without UPDATE with INVALID_CONFIG naming the privilege, passes one with it, and names an unknown role", async () => {
    const table = "leaf_alloc_grants";
    const owner = new PostgresSegmentStore({ url: db.urlFor(database), table });
    const as = (user: string) =>
      new PostgresSegmentStore({
        hosts: [{ host: db.host, port: db.port }],
        user,
        password: "pw",
        database,
        table,
      });
    const stores = [owner];
    try {
      await owner.createSchema();
      for (const [role, grants] of [
        ["seg_select", "SELECT"],
        ["seg_update", "SELECT, UPDATE"],
      ] as const) {
        await admin([
          `CREATE ROLE ${role} LOGIN PASSWORD 'pw'`,
          `GRANT ${grants} ON ${table} TO ${role}`,
        ]);
      }
      const selectOnly = as("seg_select");
      const updater = as("seg_update");
      const nobody = as("seg_nobody");
      stores.push(selectOnly, updater, nobody);
      const error = await selectOnly.checkAccess().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isLeafError(error, ErrorCodes.INVALID_CONFIG)).toBe(true);
      expect((error as Error).message).toMatch(/missing privilege on .*permission denied/);
      expect((error as Error).message).toContain(
        `GRANT SELECT, INSERT, UPDATE, DELETE ON ${database}.public.${table}`,
      );
      expect((error as { details: { postgres: string } }).details.postgres).toBe("access");
      await expect(updater.checkAccess()).resolves.toBeUndefined();
      // The no-op UPDATE changed nothing.
      expect(await owner.listTags()).toEqual([]);
      const denied = await nobody.checkAccess().then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(isLeafError(denied, ErrorCodes.INVALID_CONFIG)).toBe(true);
      expect(denied!.message).toMatch(/access denied on .*seg_nobody/);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it("answers UNAVAILABLE naming the host when no server answers", async () => {
    const store = new PostgresSegmentStore({
      url: `postgres://postgres@127.0.0.1:1/${database}`,
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

  // How URLs are read (several hosts, JDBC's form) is @leaf/postgres-support's, tested there.
  it("refuses bad options naming the key, the password hidden", () => {
    const config = (fn: () => unknown, key: string) =>
      expect(fn).toThrow(
        expect.objectContaining({
          code: ErrorCodes.INVALID_CONFIG,
          details: expect.objectContaining({ key }),
        }),
      );
    config(() => new PostgresSegmentStore({ url: "mysql://x/y" }), "url");
    expect(() => new PostgresSegmentStore({ url: "mysql://x/y" })).toThrow(
      /^\[leaf\] \[segment\] invalid url: "mysql:\/\/x\/y"; expected a URL like postgres:\/\//,
    );
    config(() => new PostgresSegmentStore({ url: "postgres://h:99999/db" }), "url");
    config(() => new PostgresSegmentStore({ url: "postgres://h:5432" }), "database");
    config(
      () => new PostgresSegmentStore({ url: "postgres://h/db", table: "leaf; DROP" }),
      "table",
    );
    config(
      () => new PostgresSegmentStore({ url: "postgres://h/db", table: "a".repeat(56) }),
      "table",
    );
    config(
      () => new PostgresSegmentStore({ url: "postgres://h/db", connectionLimit: 0 }),
      "connectionLimit",
    );
    config(() => new PostgresSegmentStore({ hosts: [] }), "url");
    expect(() => new PostgresSegmentStore({ url: "postgres://u:s3cret@h:0/db" })).toThrow(
      /\*\*\*@/,
    );
  });
});
