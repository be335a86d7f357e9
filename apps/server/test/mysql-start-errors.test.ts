// The server's start against a real MariaDB that is set up wrong, as an operator meets it: a user
// without UPDATE, a wrong password, a missing database, a missing table, a read-only server and a
// closed port each make the CLI exit 1 with what is wrong and the key that fixes it, instead of
// starting "ready" and answering 503 on every request.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, type MysqlHandle, runNode, startMysql, stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI, startCli, text } from "./cli-process";

// mysql2 is the test kit's dependency, not the server's: the tests reach it through the kit.
interface SqlConnection {
  query(sql: string): Promise<unknown>;
  end(): Promise<void>;
}
const mysql = createRequire(import.meta.resolve("@leaf/testkit"))("mysql2/promise") as {
  createConnection(options: object): Promise<SqlConnection>;
};

const LEAF_ALLOC_SQL = readFileSync(
  new URL("../../../packages/segment-mysql/sql/leaf_alloc.sql", import.meta.url),
  "utf8",
);

let db: MysqlHandle;
let database: string;
const dirs: string[] = [];

beforeAll(async () => {
  // A private server: one test switches it to read-only.
  db = await startMysql({ useEnv: false });
  database = await db.createDatabase("leaf_start");
  const root = await mysql.createConnection({
    ...db.connectionOptions(database),
    multipleStatements: true,
  });
  try {
    await root.query(LEAF_ALLOC_SQL);
    await root.query(
      "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('leaf-segment-test', 1, 2000, 'test')",
    );
    for (const [user, grants] of [
      ["leaf_select", "SELECT"],
      ["leaf_rw", "SELECT, INSERT, UPDATE"],
    ] as const) {
      await root.query(`CREATE USER '${user}'@'%' IDENTIFIED BY 'pw-${user}'`);
      await root.query(`GRANT ${grants} ON \`${database}\`.* TO '${user}'@'%'`);
    }
  } finally {
    await root.end();
  }
}, 120_000);

afterAll(async () => {
  await db?.dispose();
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Runs the server CLI on the given database settings until it exits (or 60 s). */
async function start(settings: { url: string; user: string; password: string }) {
  const cwd = mkdtempSync(join(tmpdir(), "leaf-mysql-start-"));
  dirs.push(cwd);
  return runNode(CLI, [], {
    cwd,
    env: {
      LEAF_SERVER_PORT: String(await freePort()),
      LEAF_SERVER_DRAIN_MS: "0",
      LEAF_SEGMENT_MYSQL_URL: settings.url,
      LEAF_SEGMENT_MYSQL_USERNAME: settings.user,
      LEAF_SEGMENT_MYSQL_PASSWORD: settings.password,
      LEAF_SNOWFLAKE_ENABLED: "false",
    },
    timeoutMs: 60_000,
  });
}

const url = (name = database, port = db.port) => `mysql://${db.host}:${port}/${name}`;

describe("the server's start on a MySQL store set up wrong", () => {
  it("starts and serves with a user that may SELECT and UPDATE (the control)", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "leaf-mysql-start-"));
    dirs.push(cwd);
    const port = await freePort();
    const server = await startCli(cwd, {
      LEAF_SERVER_PORT: String(port),
      LEAF_SEGMENT_MYSQL_URL: url(),
      LEAF_SEGMENT_MYSQL_USERNAME: "leaf_rw",
      LEAF_SEGMENT_MYSQL_PASSWORD: "pw-leaf_rw",
      LEAF_SNOWFLAKE_ENABLED: "false",
    });
    try {
      const id = await text(`http://127.0.0.1:${port}/api/segment/get/leaf-segment-test`);
      expect(id.status).toBe(200);
      expect(BigInt(id.body)).toBeGreaterThanOrEqual(1n);
    } finally {
      server.child.kill("SIGTERM");
      expect(await server.exited).toBe(0);
    }
  });

  it("fails the start naming UPDATE and the table for a user without UPDATE", async () => {
    const run = await start({ url: url(), user: "leaf_select", password: "pw-leaf_select" });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain("segment mode could not start");
    expect(run.stderr).toContain(`the user may not UPDATE on table ${database}.leaf_alloc`);
    expect(run.stderr).toContain(`GRANT UPDATE ON ${database}.leaf_alloc`);
    expect(run.stdout).not.toContain("running on");
  });

  it("says access denied and names the user and password keys for a wrong password", async () => {
    const run = await start({ url: url(), user: "leaf_rw", password: "wrong" });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain(`access denied on ${db.host}:${db.port}`);
    expect(run.stderr).toContain("Access denied for user 'leaf_rw'@");
    expect(run.stderr).toContain(
      "check segment.mysql.username (LEAF_SEGMENT_MYSQL_USERNAME) / segment.mysql.password (LEAF_SEGMENT_MYSQL_PASSWORD)",
    );
    expect(run.stderr).not.toMatch(/unavailable|unreachable|is up/i);
    // The one host is named once, not once per try.
    expect(run.stderr.split(`${db.host}:${db.port}`).length - 1).toBe(1);
  });

  it("says the database is unknown and names the URL key", async () => {
    const run = await start({ url: url("no_such_db"), user: db.user, password: "" });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain("unknown database");
    expect(run.stderr).toContain("no_such_db");
    expect(run.stderr).toContain(
      "check the database in segment.mysql.url (LEAF_SEGMENT_MYSQL_URL)",
    );
  });

  it("says the table is missing and names segment.mysql.createTable", async () => {
    const empty = await db.createDatabase("leaf_empty");
    const run = await start({ url: url(empty), user: db.user, password: "" });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain("missing table");
    expect(run.stderr).toContain(
      "set segment.mysql.createTable (LEAF_SEGMENT_MYSQL_CREATE_TABLE) to true to create it at start",
    );
    expect(run.stderr).not.toContain("createSchema()");
  });

  it("says the server is read-only (a user without SUPER) and names the URL key", async () => {
    const root = await mysql.createConnection(db.connectionOptions(database));
    try {
      await root.query("SET GLOBAL read_only = ON");
      const run = await start({ url: url(), user: "leaf_rw", password: "pw-leaf_rw" });
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toContain(`the server on ${db.host}:${db.port} is read-only`);
      expect(run.stderr).toContain(
        "point segment.mysql.url (LEAF_SEGMENT_MYSQL_URL) at the primary",
      );
    } finally {
      await root.query("SET GLOBAL read_only = OFF");
      await root.end();
    }
  });

  it("says the server is unreachable, naming the host once and the URL key", async () => {
    const closed = await freePort();
    const run = await start({ url: url(database, closed), user: "leaf_rw", password: "x" });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain(`MySQL on ${db.host}:${closed} is unreachable`);
    expect(run.stderr).toContain("ECONNREFUSED");
    expect(run.stderr).toContain(
      "check that the server is up and that segment.mysql.url (LEAF_SEGMENT_MYSQL_URL) names it",
    );
    expect(run.stderr.split(`${db.host}:${closed}`).length - 1).toBe(1);
  });
});
