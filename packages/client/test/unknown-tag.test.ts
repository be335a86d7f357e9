// A tag created through one server is unknown to the others until their next tag refresh. Two real
// servers on one private MariaDB, the second with a refresh far longer than the test: the client
// asks the other server rather than failing, and gives UNKNOWN_TAG only when no server knows the
// tag.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LeafServer, loadConfig, startServer } from "@leaf/server";
import { freePort, type MysqlHandle, startMysql, stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { LeafClient, type LeafClientError } from "../src/index";

const ADMIN = "client-unknown-tag-admin";
let mysql: MysqlHandle;
let dir: string;
let a: LeafServer;
let b: LeafServer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "leaf-client-unknown-tag-"));
  mysql = await startMysql({ useEnv: false });
  const database = await mysql.createDatabase("leaf_unknown_tag");
  const start = (name: string) =>
    startServer(
      loadConfig({
        values: {
          dataDir: join(dir, name),
          server: { host: "127.0.0.1", port: 0, drainMs: 0, adminToken: ADMIN },
          segment: {
            store: "mysql",
            mysql: {
              url: mysql.urlFor(database),
              password: mysql.password ?? "",
              createTable: true,
            },
            demoTag: "",
            refreshIntervalMs: 600_000,
          },
          snowflake: { enabled: false },
        },
        env: {},
      }),
      { logger: false },
    );
  a = await start("a");
  b = await start("b");
  // Created through A after B read the table: B does not know it until its refresh in 10 minutes.
  const created = await fetch(`${a.url}/api/v1/admin/tags`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify({ tag: "fresh", step: 1000 }),
  });
  expect(created.status, await created.text()).toBe(201);
}, 120_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  await stopAll();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function failure(promise: Promise<unknown>): Promise<LeafClientError> {
  try {
    await promise;
  } catch (error) {
    return error as LeafClientError;
  }
  throw new Error("expected the call to fail");
}

it("asks the other server when the first has not read a new tag yet", async () => {
  const direct = await fetch(`${b.url}/api/v1/segment/fresh/range?count=1`);
  expect(direct.status).toBe(404); // B really does not know it.
  expect(await direct.json()).toMatchObject({ code: "UNKNOWN_TAG", leafCode: -2 });
  const client = new LeafClient({ servers: [b.url, a.url] });
  const fresh = client.segment("fresh");
  const first = await fresh.nextId();
  expect(first).toBeGreaterThan(0n);
  expect(fresh.nextIdSync()).toBe(first + 1n);
  const [asB, asA] = client.servers();
  // B was asked first and answered: it is up, and its breaker stays closed.
  expect(asB).toMatchObject({ url: b.url, state: "closed", consecutiveFailures: 0, successes: 1 });
  expect(asA).toMatchObject({ url: a.url, state: "closed", successes: 1 });
  await client.close();
});

it("gives UNKNOWN_TAG (-2) once every server says it, without opening a breaker", async () => {
  const client = new LeafClient({ servers: [b.url, a.url], breaker: { failures: 1 } });
  const error = await failure(client.segment("no-such-tag").nextId());
  expect(error.code).toBe("UNKNOWN_TAG");
  expect(error.leafCode).toBe(-2);
  expect(error.status).toBe(404);
  expect(error.attempts).toEqual([]);
  for (const server of client.servers()) {
    expect(server).toMatchObject({ state: "closed", consecutiveFailures: 0, successes: 1 });
  }
  await client.close();
});

it("gives UNKNOWN_TAG with the other servers' failures when those that answered do not know the tag", async () => {
  const dead = `http://127.0.0.1:${await freePort()}`;
  const client = new LeafClient({ servers: [b.url, dead], retries: 0 });
  const error = await failure(client.segment("fresh").nextId());
  expect(error.code).toBe("UNKNOWN_TAG");
  expect(error.attempts.map((attempt) => attempt.server)).toEqual([dead]);
  expect(error.message).toContain(b.url);
  expect(error.message).toContain(dead);
  await client.close();
});
