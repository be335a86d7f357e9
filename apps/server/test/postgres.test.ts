// The server on PostgreSQL, as an operator runs it: segment mode from a configuration file and from
// LEAF_* variables against a private PostgreSQL (the store's backend entry), its ids counted across
// two servers sharing the table, what the monitor, metrics and health show, and a start error told
// in the server's keys; snowflake mode with its worker ids leased from the same database, the
// registry chosen from a configuration file and from LEAF_* variables.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { layouts } from "@leaf/core";
import {
  connectPostgres,
  freePort,
  type PostgresHandle,
  runNode,
  startPostgres,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/index";
import { CLI, startCli, text } from "./cli-process";

const TOKEN = "postgres-admin-token-0123456789";

let pg: PostgresHandle;
let database: string;
const dirs: string[] = [];

beforeAll(async () => {
  pg = await startPostgres({ useEnv: false });
  database = await pg.createDatabase("leaf_server");
}, 120_000);

afterAll(async () => {
  await pg?.dispose();
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "leaf-server-postgres-"));
  dirs.push(dir);
  return dir;
}

const url = () => `postgres://${pg.user}@${pg.host}:${pg.port}/${database}`;

async function createTag(port: number, tag: string, step: number): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/admin/tags`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ tag, step }),
  });
  expect(res.status, await res.text()).toBe(201);
}

/** `count` ids of `tag` through the Java path, one request each, as decimal strings. */
async function ids(port: number, tag: string, count: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await text(`http://127.0.0.1:${port}/api/segment/get/${tag}`);
    expect(res.status, res.body).toBe(200);
    out.push(res.body);
  }
  return out;
}

describe("the server on a PostgreSQL segment store", () => {
  it("reads segment.postgres.* from a file and LEAF_SEGMENT_POSTGRES_* from the environment", () => {
    const dir = tempDir();
    const file = join(dir, "leaf.json");
    writeFileSync(
      file,
      JSON.stringify({
        segment: { postgres: { url: url(), password: "", table: "ids.alloc" } },
        snowflake: { enabled: false },
      }),
    );
    const fromFile = loadConfig({ file, env: {}, cwd: dir });
    expect(fromFile.segment?.store).toBe("postgres");
    expect(fromFile.segment?.backend).toMatchObject({ url: url(), table: "ids.alloc" });
    // A shared store: the server listens on every interface, and a default worker id is refused.
    expect(fromFile.server.host).toBe("0.0.0.0");
    expect(() =>
      loadConfig({ env: { LEAF_SEGMENT_POSTGRES_URL: url(), LEAF_SEGMENT_POSTGRES_PASSWORD: "" } }),
    ).toThrow("snowflake mode would use the local registry's default worker id 0");
    const fromEnv = loadConfig({
      env: {
        LEAF_SEGMENT_POSTGRES_URL: url(),
        LEAF_SEGMENT_POSTGRES_PASSWORD: "",
        LEAF_SNOWFLAKE_LOCAL_WORKER_ID: "3",
      },
      cwd: dir,
    });
    expect(fromEnv.segment?.store).toBe("postgres");
    expect(() => loadConfig({ env: { LEAF_SEGMENT_POSTGRES_URL: url() }, cwd: dir })).toThrow(
      "missing segment.postgres.password / LEAF_SEGMENT_POSTGRES_PASSWORD",
    );
    expect(() =>
      loadConfig({
        env: {
          LEAF_SEGMENT_POSTGRES_URL: "mysql://db:3306/leaf",
          LEAF_SEGMENT_POSTGRES_PASSWORD: "",
        },
        cwd: dir,
      }),
    ).toThrow("expected a database URL: postgres://user:password@host:5432/leaf");
    // Two stores' addresses without segment.store: neither is ignored.
    expect(() =>
      loadConfig({
        env: {
          LEAF_SEGMENT_POSTGRES_URL: url(),
          LEAF_SEGMENT_POSTGRES_PASSWORD: "",
          LEAF_SEGMENT_MYSQL_URL: "mysql://u:p@db:3306/leaf",
        },
        cwd: dir,
      }),
    ).toThrow("name 2 segment stores; choose one with");
  });

  it("serves a tag from two servers on one table (file and environment), every id once", async () => {
    const first = await freePort();
    const second = await freePort();
    const dir1 = tempDir();
    const file = join(dir1, "leaf.json");
    writeFileSync(
      file,
      JSON.stringify({
        server: { port: first, host: "127.0.0.1", adminToken: TOKEN },
        segment: { postgres: { url: url(), password: "", createTable: true } },
        snowflake: { enabled: false },
      }),
    );
    const a = await startCli(dir1, {}, ["--config", file]);
    await createTag(first, "orders", 7);
    const b = await startCli(tempDir(), {
      LEAF_SERVER_PORT: String(second),
      LEAF_SERVER_HOST: "127.0.0.1",
      LEAF_SEGMENT_POSTGRES_URL: url(),
      LEAF_SEGMENT_POSTGRES_PASSWORD: "",
      LEAF_SNOWFLAKE_ENABLED: "false",
    });
    try {
      const all = [...(await ids(first, "orders", 40)), ...(await ids(second, "orders", 40))];
      all.push(...(await ids(first, "orders", 25)), ...(await ids(second, "orders", 25)));
      expect(new Set(all).size).toBe(all.length);
      expect(all.every((id) => /^[1-9][0-9]*$/.test(id))).toBe(true);

      const metrics = await text(`http://127.0.0.1:${first}/metrics`);
      expect(metrics.body).toMatch(
        new RegExp(
          `^leaf_backend_info\\{role="segment-store",kind="postgres",mode="",target="${pg.host}:${pg.port}/${database}.leaf_alloc",shared="true"\\} 1$`,
          "m",
        ),
      );
      expect(metrics.body).not.toContain("postgres@");
      const monitor = JSON.parse((await text(`http://127.0.0.1:${second}/api/v1/monitor`)).body);
      expect(monitor.segment.store).toBe("postgres");
      expect(monitor.segment.backend).toEqual({
        kind: "postgres",
        mode: "",
        target: `${pg.host}:${pg.port}/${database}.leaf_alloc`,
        shared: true,
      });
      expect((await text(`http://127.0.0.1:${second}/health/ready`)).status).toBe(200);
    } finally {
      a.child.kill("SIGTERM");
      b.child.kill("SIGTERM");
      expect(await a.exited).toBe(0);
      expect(await b.exited).toBe(0);
    }
  }, 120_000);

  it("fails the start naming segment.postgres.createTable when the table is missing", async () => {
    const empty = await pg.createDatabase("leaf_empty");
    const run = await runNode(CLI, [], {
      cwd: tempDir(),
      env: {
        LEAF_SERVER_PORT: String(await freePort()),
        LEAF_SERVER_DRAIN_MS: "0",
        LEAF_SEGMENT_POSTGRES_URL: `postgres://${pg.user}@${pg.host}:${pg.port}/${empty}`,
        LEAF_SEGMENT_POSTGRES_PASSWORD: "",
        LEAF_SNOWFLAKE_ENABLED: "false",
      },
      timeoutMs: 60_000,
    });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain("segment mode could not start");
    expect(run.stderr).toContain(
      "set segment.postgres.createTable (LEAF_SEGMENT_POSTGRES_CREATE_TABLE) to true to create it at start",
    );
  }, 90_000);
});

describe("the server with the PostgreSQL registry", () => {
  /** Snowflake only, worker ids from the PostgreSQL registry on the test database. */
  function snowflakeEnv(port: number, extra: Record<string, string> = {}) {
    return {
      LEAF_SERVER_PORT: String(port),
      LEAF_SERVER_HOST: "127.0.0.1",
      LEAF_SEGMENT_ENABLED: "false",
      LEAF_SNOWFLAKE_POSTGRES_URL: url(),
      LEAF_SNOWFLAKE_POSTGRES_PASSWORD: "",
      LEAF_SNOWFLAKE_POSTGRES_CREATE_TABLE: "true",
      LEAF_SNOWFLAKE_POSTGRES_LEASE_MS: "3000",
      ...extra,
    };
  }

  async function snowflakeIds(port: number, count: number): Promise<string[]> {
    const res = await text(`http://127.0.0.1:${port}/api/v1/snowflake/ids?count=${count}`);
    expect(res.status, res.body).toBe(200);
    return (JSON.parse(res.body) as { ids: string[] }).ids;
  }

  it("gives two servers distinct worker ids from one database, and their ids are distinct", async () => {
    const ports = [await freePort(), await freePort()];
    const servers = [];
    for (const port of ports) servers.push(await startCli(tempDir(), snowflakeEnv(port)));
    try {
      const workerIds = new Set<number>();
      const all: string[] = [];
      for (const port of ports) {
        const monitor = JSON.parse((await text(`http://127.0.0.1:${port}/api/v1/monitor`)).body);
        expect(monitor.snowflake.registry).toBe("postgres");
        expect(monitor.snowflake.backend).toEqual({
          kind: "postgres",
          mode: "lease",
          target: `${pg.host}:${pg.port}/${database}`,
          shared: true,
        });
        workerIds.add(monitor.snowflake.workerId);
        all.push(...(await snowflakeIds(port, 5000)));
      }
      expect(workerIds.size).toBe(2);
      expect(new Set(all).size).toBe(all.length);
      const ready = await text(`http://127.0.0.1:${ports[0]}/health/ready`);
      expect(ready.body).toContain("postgres registry");
    } finally {
      for (const server of servers) server.child.kill("SIGTERM");
      for (const server of servers) expect(await server.exited).toBe(0);
    }
  }, 120_000);

  /** The held grants of the lease table `table`: worker id by the holder's port. */
  async function heldGrants(table: string): Promise<Map<number, number>> {
    const client = await connectPostgres(pg.connectionOptions(database));
    try {
      const { rows } = await client.query<{ worker_id: number; holder_port: number }>(
        `SELECT worker_id, holder_port FROM ${table} WHERE grant_token IS NOT NULL AND lease_until > now()`,
      );
      return new Map(rows.map((r) => [r.holder_port, r.worker_id]));
    } finally {
      await client.end();
    }
  }

  it("takes snowflake.registry=postgres from a configuration file: a worker id granted by the database, every id distinct", async () => {
    const table = "file_worker_lease";
    const filePort = await freePort();
    const envPort = await freePort();
    const dir = tempDir();
    const file = join(dir, "leaf.json");
    writeFileSync(
      file,
      JSON.stringify({
        server: { port: filePort, host: "127.0.0.1" },
        segment: { enabled: false },
        snowflake: {
          registry: "postgres",
          postgres: { url: url(), password: "", table, createTable: true, leaseMs: 3000 },
        },
      }),
    );
    expect(loadConfig({ file, env: {}, cwd: dir }).snowflake?.registry).toMatchObject({
      kind: "postgres",
      table,
      leaseMs: 3000,
    });
    const servers = [await startCli(dir, {}, ["--config", file])];
    // A second server on the same table from LEAF_* variables, at the same time.
    servers.push(
      await startCli(tempDir(), snowflakeEnv(envPort, { LEAF_SNOWFLAKE_POSTGRES_TABLE: table })),
    );
    const ports = [filePort, envPort];
    try {
      const workerIds = new Map<number, number>();
      for (const port of ports) {
        const monitor = JSON.parse((await text(`http://127.0.0.1:${port}/api/v1/monitor`)).body);
        expect(monitor.snowflake.registry).toBe("postgres");
        expect(monitor.snowflake.backend).toMatchObject({ kind: "postgres", mode: "lease" });
        workerIds.set(port, monitor.snowflake.workerId);
      }
      // The database holds each server's grant, for the worker id the server uses.
      expect(await heldGrants(table)).toEqual(workerIds);
      expect(new Set(workerIds.values()).size).toBe(2);
      const all: string[] = [];
      for (let round = 0; round < 2; round++) {
        for (const port of ports) {
          const got = await snowflakeIds(port, 5000);
          for (const id of got) {
            expect(layouts.leaf.decompose(id).workerId).toBe(workerIds.get(port));
          }
          all.push(...got);
        }
      }
      expect(all).toHaveLength(20_000);
      expect(new Set(all).size).toBe(all.length);
    } finally {
      for (const server of servers) server.child.kill("SIGTERM");
      for (const server of servers) expect(await server.exited).toBe(0);
    }
    // A stopped server gives its worker id back.
    expect((await heldGrants(table)).size).toBe(0);
  }, 120_000);

  it("leases a StatefulSet pod's ordinal exactly: a second pod of that ordinal is refused while the first holds it", async () => {
    const pod = { LEAF_SNOWFLAKE_STATEFUL_SET: "true", HOSTNAME: "leaf-7" };
    const first = await freePort();
    const holder = await startCli(tempDir(), snowflakeEnv(first, pod));
    try {
      const monitor = JSON.parse((await text(`http://127.0.0.1:${first}/api/v1/monitor`)).body);
      expect(monitor.snowflake.workerId).toBe(7);
      const second = await runNode(CLI, [], {
        cwd: tempDir(),
        env: { ...snowflakeEnv(await freePort(), pod), LEAF_SERVER_DRAIN_MS: "0" },
        timeoutMs: 60_000,
      });
      expect(second.code, second.stdout).toBe(1);
      expect(second.stderr).toContain("WORKER_ID_IN_USE");
    } finally {
      holder.child.kill("SIGTERM");
      expect(await holder.exited).toBe(0);
    }
  }, 120_000);
});
