// PostgresRegistry's own rules against a private PostgreSQL: the schema file, options refused with
// their names, a fencing token per grant, int8 columns read exactly, no local fallback, a server
// that takes no writes refused.
import { readFileSync } from "node:fs";
import { ErrorCodes, isLeafError } from "@leaf/core";
import { freePort, type PostgresHandle, startPostgres, stopAll } from "@leaf/testkit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSchema, PostgresRegistry, schemaSql } from "../src/index";

let postgres: PostgresHandle;
let db: string;
let services = 0;
const node = (name: string, i = 1) => ({ name, ip: `10.5.0.${i}`, port: 8080 });
/** What an acquire for a new service rejects with (its value if it resolves). */
const refusal = (registry: PostgresRegistry) =>
  registry.acquire({ node: node(`reg${services++}`), maxWorkerId: 3 }).catch((e: unknown) => e);

beforeAll(async () => {
  postgres = await startPostgres();
  db = await postgres.createDatabase("leaf_registry");
  await createSchema(postgres.urlFor(db));
});

afterAll(() => stopAll());

async function sql(text: string, values: unknown[] = [], database = db) {
  const client = new pg.Client(postgres.connectionOptions(database));
  await client.connect();
  try {
    return (await client.query(text, values)).rows;
  } finally {
    await client.end();
  }
}

describe("PostgresRegistry", () => {
  it("ships sql/leaf_worker_lease.sql holding exactly the statements createSchema runs behind its lock", () => {
    const file = readFileSync(new URL("../sql/leaf_worker_lease.sql", import.meta.url), "utf8");
    expect(file).toBe(schemaSql());
  });

  it("creates its table from several processes at once on an empty database: none fails", async () => {
    // PostgreSQL checks IF NOT EXISTS before it writes the catalog: two sessions creating the
    // table together failed on a duplicate key in pg_class, unless they wait for each other.
    const failed: string[] = [];
    const rounds = 20;
    for (let round = 0; round < rounds; round++) {
      const url = postgres.urlFor(await postgres.createDatabase("leaf_race"));
      const registries = [0, 1].map(() => new PostgresRegistry({ url }));
      const results = await Promise.allSettled([
        createSchema(url),
        ...registries.map((r) => r.createSchema()),
      ]);
      await Promise.all(registries.map((r) => r.close()));
      for (const r of results) if (r.status === "rejected") failed.push(String(r.reason));
    }
    expect(failed, `${failed.length} of ${rounds * 3} failed`).toEqual([]);
  }, 60_000);

  it("refuses bad options, naming the option and the value", () => {
    expect(() => new PostgresRegistry({ url: "mysql://root@127.0.0.1:3306/leaf" })).toThrow(
      /url.*a URL with one host, like postgres:\/\//,
    );
    expect(() => new PostgresRegistry({ url: "postgres://a:5432,b:5432/leaf" })).toThrow(
      /one host/,
    );
    expect(() => new PostgresRegistry({ url: postgres.urlFor(db), table: "Leaf-Lease" })).toThrow(
      /table.*Leaf-Lease.*lower-case letters/,
    );
    expect(() => new PostgresRegistry({ url: postgres.urlFor(db), table: "a.b.c" })).toThrow(
      /table.*a\.b\.c.*optionally schema\.table/,
    );
    expect(() => new PostgresRegistry({ url: postgres.urlFor(db), leaseMs: 100 })).toThrow(
      /leaseMs.*at least 500/,
    );
    expect(() => new PostgresRegistry({})).toThrow(/url.*postgres:\/\/user:password@host:5432/);
  });

  it("gives every grant a larger fencing token, and its rows carry it", async () => {
    const name = `reg${services++}`;
    const registry = new PostgresRegistry({ url: postgres.urlFor(db) });
    try {
      const first = await registry.acquire({ node: node(name), maxWorkerId: 3, backups: 1 });
      const second = await registry.acquire({ node: node(name, 2), maxWorkerId: 3 });
      expect(typeof first.fencingToken).toBe("bigint");
      expect(second.fencingToken > first.fencingToken).toBe(true);
      const rows = await sql(
        "SELECT worker_id, grant_token::text AS token FROM leaf_worker_lease WHERE leaf_name = $1 ORDER BY worker_id",
        [name],
      );
      expect(rows).toEqual([
        { worker_id: first.workerId, token: first.fencingToken.toString() },
        { worker_id: first.backups[0]!.workerId, token: first.fencingToken.toString() },
        { worker_id: second.workerId, token: second.fencingToken.toString() },
      ]);
      await first.release();
      await second.release();
    } finally {
      await registry.close();
    }
  });

  it("reads last_timestamp exactly and refuses one that is no timestamp", async () => {
    const name = `reg${services++}`;
    const registry = new PostgresRegistry({ url: postgres.urlFor(db), toleranceMs: 0 });
    try {
      const lease = await registry.acquire({ node: node(name), maxWorkerId: 0 });
      const final = Date.now() - 1000;
      await lease.release(final);
      const again = await registry.acquire({ node: node(name), maxWorkerId: 0 });
      expect(again.lastTimestamp).toBe(final);
      await again.release();
      await sql("UPDATE leaf_worker_lease SET last_timestamp = $1 WHERE leaf_name = $2", [
        "9223372036854775807",
        name,
      ]);
      const error = await registry
        .acquire({ node: node(name), maxWorkerId: 0 })
        .catch((e: unknown) => e);
      expect(isLeafError(error, ErrorCodes.CORRUPT_DATA)).toBe(true);
      expect((error as Error).message).toContain("9223372036854775807");
      // The refused start gave the id back.
      expect(
        await sql("SELECT grant_token FROM leaf_worker_lease WHERE leaf_name = $1", [name]),
      ).toEqual([{ grant_token: null }]);
    } finally {
      await registry.close();
    }
  });

  it("has no local fallback when PostgreSQL cannot be reached, and says why", async () => {
    const port = await freePort();
    const registry = new PostgresRegistry({ url: `postgres://postgres@127.0.0.1:${port}/${db}` });
    try {
      const error = await refusal(registry);
      expect(isLeafError(error, ErrorCodes.UNAVAILABLE)).toBe(true);
      expect((error as Error).message).toContain("ECONNREFUSED");
      expect((error as Error).message).toContain("lease mode has no local fallback");
    } finally {
      await registry.close();
    }
  });

  it("refuses a server that takes no writes (default_transaction_read_only), pointing at the primary", async () => {
    const readOnly = await postgres.createDatabase("leaf_registry_ro");
    await createSchema(postgres.urlFor(readOnly));
    await sql(`ALTER DATABASE ${readOnly} SET default_transaction_read_only = on`);
    const registry = new PostgresRegistry({ url: postgres.urlFor(readOnly) });
    try {
      const error = await refusal(registry);
      expect(isLeafError(error, ErrorCodes.UNAVAILABLE)).toBe(true);
      expect((error as Error).message).toContain("takes no writes");
      expect((error as Error).message).toContain("25006");
      // problem and fix apart, as every PostgreSQL error of the registry gives them.
      expect(isLeafError(error) && error.details).toMatchObject({
        postgres: "read-only",
        sqlState: "25006",
        problem: expect.stringContaining("takes no writes"),
        fix: expect.stringContaining("Point url at the primary"),
      });
    } finally {
      await registry.close();
    }
  });

  it("tells a missing table apart: INVALID_CONFIG naming createSchema", async () => {
    const empty = await postgres.createDatabase("leaf_registry_empty");
    const registry = new PostgresRegistry({ url: postgres.urlFor(empty) });
    try {
      const error = await refusal(registry);
      expect(isLeafError(error, ErrorCodes.INVALID_CONFIG)).toBe(true);
      expect((error as Error).message).toContain("createSchema()");
      expect(isLeafError(error) && error.details).toMatchObject({
        postgres: "schema",
        sqlState: "42P01",
        problem: expect.stringMatching(/^missing table on .*leaf_worker_lease.* \(42P01\)$/),
        fix: "create the table with createSchema() (or the package's sql/ file) first",
      });
    } finally {
      await registry.close();
    }
  });

  it("names the sequence of fencing tokens when the user may not use it", async () => {
    const { host, port } = postgres.connectionOptions(db);
    await sql("CREATE ROLE reg_noseq LOGIN PASSWORD 'pw'");
    await sql("GRANT SELECT, INSERT, UPDATE, DELETE ON leaf_worker_lease TO reg_noseq");
    const registry = new PostgresRegistry({ url: `postgres://reg_noseq:pw@${host}:${port}/${db}` });
    try {
      const error = await refusal(registry);
      expect(isLeafError(error, ErrorCodes.INVALID_CONFIG)).toBe(true);
      expect((error as Error).message).toMatch(/missing privilege on .*permission denied/);
      expect(isLeafError(error) && error.details.fix).toBe(
        "grant it (GRANT SELECT, INSERT, UPDATE, DELETE ON public.leaf_worker_lease TO the user; USAGE on its schema and on the sequence public.leaf_worker_lease_grant_seq), or check the user and password (the options user and password, else those in url)",
      );
    } finally {
      await registry.close();
    }
  });

  it("has no local fallback when PostgreSQL cancels a statement (statement_timeout behind a held lock)", async () => {
    const slow = await postgres.createDatabase("leaf_registry_slow");
    await createSchema(postgres.urlFor(slow));
    await sql(`ALTER DATABASE ${slow} SET statement_timeout = 300`);
    // Another session holds the table: the registry's statements wait until the server cancels them.
    const holder = new pg.Client(postgres.connectionOptions(slow));
    await holder.connect();
    await holder.query("BEGIN; LOCK TABLE leaf_worker_lease IN ACCESS EXCLUSIVE MODE");
    const registry = new PostgresRegistry({ url: postgres.urlFor(slow), queryTimeoutMs: 5_000 });
    try {
      const error = await refusal(registry);
      expect(isLeafError(error, ErrorCodes.UNAVAILABLE)).toBe(true);
      expect((error as Error).message).toContain("cancelled the statement");
      expect((error as Error).message).toContain("lease mode has no local fallback");
      expect(isLeafError(error) && error.details).toMatchObject({
        postgres: "interrupted",
        sqlState: "57014",
      });
    } finally {
      await registry.close();
      await holder.end();
    }
  });

  it("uses a schema-qualified table as written, its sequence in the same schema", async () => {
    await sql("CREATE SCHEMA leafs");
    await createSchema(postgres.urlFor(db), { table: "leafs.lease" });
    const registry = new PostgresRegistry({ url: postgres.urlFor(db), table: "leafs.lease" });
    expect(registry.table).toBe("leafs.lease");
    try {
      const name = `reg${services++}`;
      const lease = await registry.acquire({ node: node(name), maxWorkerId: 3 });
      expect(
        await sql(
          "SELECT worker_id, grant_token::text AS token, (SELECT last_value::text FROM leafs.lease_grant_seq) AS last FROM leafs.lease WHERE leaf_name = $1",
          [name],
        ),
      ).toEqual([
        { worker_id: 0, token: lease.fencingToken.toString(), last: lease.fencingToken.toString() },
      ]);
      await lease.release();
    } finally {
      await registry.close();
    }
  });

  it("reads Java Leaf's JDBC form of the URL", async () => {
    const registry = new PostgresRegistry({
      url: postgres.urlFor(db).replace(/^postgres:/, "jdbc:postgresql:"),
    });
    try {
      const lease = await registry.acquire({ node: node(`reg${services++}`), maxWorkerId: 3 });
      expect(lease.workerId).toBe(0);
      await lease.release();
    } finally {
      await registry.close();
    }
  });
});
