// The server on PostgreSQL when the URL and the user keys disagree, against a private PostgreSQL
// that checks passwords: the registry logs in as snowflake.postgres.username with its password,
// not as the URL's user. And the name under which the segment store's high-water marks are kept
// names the database, the schema (public when the table names none) and the table.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSchema } from "@leaf/registry-postgres";
import {
  connectPostgres,
  freePort,
  type PostgresHandle,
  startPostgres,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { segmentStoreId } from "../src/config-segment";
import { loadConfig } from "../src/index";
import { startCli, text } from "./cli-process";

let postgres: PostgresHandle;
let database: string;
const dirs: string[] = [];

beforeAll(async () => {
  postgres = await startPostgres({ checkPasswords: true });
  database = await postgres.createDatabase("leaf_server_users");
  await createSchema(postgres.urlFor(database));
  const client = await connectPostgres(postgres.connectionOptions(database));
  try {
    for (const statement of [
      "CREATE ROLE reguser LOGIN PASSWORD 'NewPw'",
      "CREATE ROLE leafuser LOGIN PASSWORD 'right'",
      "GRANT SELECT, INSERT, UPDATE, DELETE ON public.leaf_worker_lease TO leafuser",
      "GRANT USAGE, UPDATE ON SEQUENCE public.leaf_worker_lease_grant_seq TO leafuser",
    ]) {
      await client.query(statement);
    }
  } finally {
    await client.end();
  }
}, 120_000);

afterAll(async () => {
  await postgres?.dispose();
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("the server's PostgreSQL users and tables", () => {
  it("leases worker ids as snowflake.postgres.username, over stale credentials in the URL", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-server-postgres-users-"));
    dirs.push(dir);
    const port = await freePort();
    const server = await startCli(dir, {
      LEAF_SERVER_PORT: String(port),
      LEAF_SERVER_HOST: "127.0.0.1",
      LEAF_SEGMENT_ENABLED: "false",
      // reguser's password is no longer OldPw.
      LEAF_SNOWFLAKE_POSTGRES_URL: `postgres://reguser:OldPw@${postgres.host}:${postgres.port}/${database}`,
      LEAF_SNOWFLAKE_POSTGRES_USERNAME: "leafuser",
      LEAF_SNOWFLAKE_POSTGRES_PASSWORD: "right",
      LEAF_SNOWFLAKE_POSTGRES_LEASE_MS: "3000",
    });
    try {
      const res = await text(`http://127.0.0.1:${port}/api/v1/snowflake/ids?count=100`);
      expect(res.status, res.body).toBe(200);
      const monitor = JSON.parse((await text(`http://127.0.0.1:${port}/api/v1/monitor`)).body);
      expect(monitor.snowflake.registry).toBe("postgres");
      expect(monitor.snowflake.workerId).toBe(0);
    } finally {
      server.child.kill("SIGTERM");
      expect(await server.exited).toBe(0);
    }
  }, 120_000);

  it("keeps the segment store's marks under database.schema.table, public when no schema is named", () => {
    const storeId = (table?: string) => {
      const config = loadConfig({
        env: {
          LEAF_SEGMENT_POSTGRES_URL: "postgres://leaf@db1:5432,db2:5432/ids",
          LEAF_SEGMENT_POSTGRES_PASSWORD: "",
          LEAF_SNOWFLAKE_ENABLED: "false",
          ...(table === undefined ? {} : { LEAF_SEGMENT_POSTGRES_TABLE: table }),
        },
      });
      return segmentStoreId(config.segment!);
    };
    expect(storeId()).toBe("postgres:ids.public.leaf_alloc");
    expect(storeId("leaf_alloc")).toBe("postgres:ids.public.leaf_alloc");
    expect(storeId("public.leaf_alloc")).toBe("postgres:ids.public.leaf_alloc");
    expect(storeId("tenant.leaf_alloc")).toBe("postgres:ids.tenant.leaf_alloc");
  });
});
