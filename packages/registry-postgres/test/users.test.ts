// Nodes of one service that log in as different users, on a PostgreSQL that checks passwords: the
// user and password options win over the URL's (and pool options that pg would lose are refused),
// and an unqualified table is public's whatever the user's search_path finds first, so two nodes
// never hold the same worker id from two tables (every id of both counted).
import { ErrorCodes, isLeafError, SnowflakeWorker } from "@leaf/core";
import {
  countRepeatedIds,
  IdLog,
  type PostgresHandle,
  started,
  startPostgres,
  stopAll,
} from "@leaf/testkit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSchema, PostgresRegistry } from "../src/index";

let postgres: PostgresHandle;
let db: string;
/** A table of this file's own, in public. */
const TABLE = "lease5";

beforeAll(async () => {
  postgres = await startPostgres({ checkPasswords: true });
  db = await postgres.createDatabase("leaf_registry_users");
  await createSchema(postgres.urlFor(db), { table: TABLE });
  await sql([
    "CREATE ROLE reguser LOGIN PASSWORD 'NewPw'",
    "CREATE ROLE leafuser LOGIN PASSWORD 'right'",
    `GRANT SELECT, INSERT, UPDATE, DELETE ON public.${TABLE} TO reguser, leafuser`,
    `GRANT USAGE, UPDATE ON SEQUENCE public.${TABLE}_grant_seq TO reguser, leafuser`,
  ]);
});

afterAll(() => stopAll());

/** Runs statements as the superuser on the test database; the last one's rows. */
async function sql<T = Record<string, unknown>>(statements: string[], values: unknown[] = []) {
  const client = new pg.Client(postgres.connectionOptions(db));
  await client.connect();
  try {
    let rows: T[] = [];
    for (const text of statements) {
      rows = (await client.query(text, text.includes("$1") ? values : [])).rows;
    }
    return rows;
  } finally {
    await client.end();
  }
}

/** A URL of the test database with `credentials` ("user:password") in it. */
const urlAs = (credentials: string, query = "") =>
  `postgres://${credentials}@${postgres.host}:${postgres.port}/${db}${query}`;

describe("PostgresRegistry with users and passwords", () => {
  it("logs in with the user and password options over the URL's, keeping the URL's parameters", async () => {
    const cases = [
      // Stale credentials in the URL: reguser's password is no longer OldPw.
      {
        url: urlAs("reguser:OldPw", "?application_name=leaf_users"),
        user: "leafuser",
        password: "right",
      },
      { url: urlAs("leafuser:stale", "?application_name=leaf_users"), password: "right" },
      { url: urlAs("reguser:right", "?application_name=leaf_users"), user: "leafuser" },
    ];
    for (const [i, options] of cases.entries()) {
      const registry = new PostgresRegistry({ ...options, table: TABLE });
      try {
        const lease = await registry.acquire({
          node: { name: `users${i}`, ip: "10.6.0.1", port: 8080 },
          maxWorkerId: 3,
        });
        const sessions = await sql<{ usename: string }>(
          [
            "SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = $1 AND application_name = 'leaf_users'",
          ],
          [db],
        );
        expect(sessions, JSON.stringify(options)).toEqual([{ usename: "leafuser" }]);
        await lease.release();
      } finally {
        await registry.close();
      }
    }
  });

  it("refuses pool options that the URL would win over, and credentials beside a pool", () => {
    const url = urlAs("reguser:OldPw");
    for (const key of ["user", "password", "host", "database"]) {
      const error = (() => {
        try {
          new PostgresRegistry({ url, poolOptions: { [key]: "x" } });
        } catch (e) {
          return e;
        }
      })();
      expect(isLeafError(error, ErrorCodes.INVALID_CONFIG), key).toBe(true);
      expect((error as Error).message).toContain(`poolOptions.${key}`);
    }
    expect(() => new PostgresRegistry({ url, poolOptions: { password: "right" } })).toThrow(
      /give the password option, which overrides the URL's/,
    );
    expect(() => new PostgresRegistry({ url, poolOptions: { password: "right" } })).not.toThrow(
      /right/,
    );
    expect(() => new PostgresRegistry({ url, user: "" })).toThrow(/invalid user.*non-empty/);
    const pool = new pg.Pool(postgres.connectionOptions(db));
    try {
      expect(() => new PostgresRegistry({ client: pool, user: "leafuser" })).toThrow(
        /invalid user.*give url instead of client/,
      );
    } finally {
      void pool.end();
    }
  });

  it("leases from public's table for every user, even one whose own schema holds a table of that name: no id twice", async () => {
    // reguser owns a schema named after it, holding its own lease5: the default search_path
    // ("$user", public) finds that one first for reguser, public's for leafuser.
    await sql([
      "CREATE SCHEMA reguser AUTHORIZATION reguser",
      `CREATE TABLE reguser.${TABLE} (LIKE public.${TABLE} INCLUDING ALL)`,
      `CREATE SEQUENCE reguser.${TABLE}_grant_seq`,
      `ALTER TABLE reguser.${TABLE} OWNER TO reguser`,
      `ALTER SEQUENCE reguser.${TABLE}_grant_seq OWNER TO reguser`,
    ]);
    const service = "users-search-path";
    const registries = [urlAs("reguser:NewPw"), urlAs("leafuser:right")].map(
      (url) => new PostgresRegistry({ url, table: TABLE }),
    );
    const workers: SnowflakeWorker[] = [];
    try {
      for (const [i, registry] of registries.entries()) {
        workers.push(
          await started(
            new SnowflakeWorker({
              registry,
              node: { name: service, ip: `10.6.1.${i + 1}`, port: 8080 },
              generator: { randomSequenceStart: 0 },
            }),
          ),
        );
      }
      // Both nodes issue side by side, 30,000 ids each.
      const logs = workers.map(() => new IdLog());
      for (let i = 0; i < 30_000; i++) {
        for (const [n, worker] of workers.entries()) logs[n]!.push(worker.nextId());
      }
      const counted = countRepeatedIds(logs);
      expect(counted.duplicates, `${counted.duplicates} of ${counted.total} ids issued twice`).toBe(
        0,
      );
      expect(new Set(workers.map((w) => w.lease?.workerId)).size).toBe(2);
      // Both leases are rows of public's table; reguser's own table stayed empty.
      const [row] = await sql<{ public: string; own: string }>(
        [
          `SELECT (SELECT count(*) FROM public.${TABLE} WHERE leaf_name = $1)::text AS public, (SELECT count(*) FROM reguser.${TABLE})::text AS own`,
        ],
        [service],
      );
      expect(row).toEqual({ public: "2", own: "0" });
    } finally {
      for (const worker of workers) await worker.close();
      for (const registry of registries) await registry.close();
    }
  });
});
