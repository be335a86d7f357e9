// DELETE /api/v1/admin/tags/:tag against both stores the server runs on: the embedded store and
// MariaDB (a private server from the test kit). The tag's row is gone for every reader of the store,
// this node stops serving it at once, another node at its next refresh, and the answer tells the
// admin the final max_id (read and deleted in one transaction), so that a tag created again at or
// above it repeats no id; the store refuses a re-create below it. Under load: two real server
// processes serve the tag while one of them deletes and re-creates it, round after round, every id
// counted.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MysqlSegmentStore } from "@leaf/segment-mysql";
import { countDuplicates, freePort, type MysqlHandle, startMysql, stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Load, serverProcess, sleep, until } from "./fault-servers";
import { get, startTestServer, type TestServer } from "./helpers";

const ADMIN = "admin-token-0123456789abcdef";
const AUTH = { authorization: `Bearer ${ADMIN}` };

let mysql: MysqlHandle;

beforeAll(async () => {
  mysql = await startMysql({ useEnv: false });
}, 180_000);

const dirs: string[] = [];

afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function del(test: TestServer, tag: string, headers: Record<string, string> = AUTH) {
  return test.server.app.inject({
    method: "DELETE",
    url: `/api/v1/admin/tags/${encodeURIComponent(tag)}`,
    headers,
  });
}

/** Creates `tag`, takes a few ids, deletes it and checks every answer on the way. */
async function deletesATag(test: TestServer, tag: string): Promise<void> {
  const created = await test.server.app.inject({
    method: "POST",
    url: "/api/v1/admin/tags",
    headers: AUTH,
    payload: { tag, step: 100, startId: "1000", description: "to delete" },
  });
  expect(created.statusCode, created.body).toBe(201);
  const ids = (await get(test.server, `/api/segment/get/${tag}?count=5`)).body.trim().split("\n");
  expect(ids).toEqual(["1000", "1001", "1002", "1003", "1004"]);

  expect((await del(test, tag, {})).statusCode).toBe(401);
  expect(
    (await del(test, tag, { authorization: "Bearer not-the-admin-token-at-all" })).statusCode,
  ).toBe(403);

  const deleted = await del(test, tag);
  expect(deleted.statusCode, deleted.body).toBe(200);
  expect(deleted.json()).toMatchObject({
    tag,
    deleted: true,
    maxId: "1100",
    step: 100,
    description: "to delete",
  });

  // This node no longer serves it, and the store no longer lists it.
  const after = await get(test.server, `/api/segment/get/${tag}`, { accept: "application/json" });
  expect(after.statusCode).toBe(404);
  expect(after.json()).toMatchObject({ code: "UNKNOWN_TAG", leafCode: -2 });
  const list = (await get(test.server, "/api/v1/admin/tags", AUTH)).json();
  expect(list.tags.map((t: { tag: string }) => t.tag)).not.toContain(tag);

  // Deleting it again, or a tag that never was, is a 404 that names the tag.
  for (const name of [tag, "never-created"]) {
    const again = await del(test, name);
    expect(again.statusCode).toBe(404);
    expect(again.json()).toMatchObject({ code: "UNKNOWN_TAG", leafCode: -2 });
    expect(again.json().message).toContain(JSON.stringify(name));
  }
  // A bad tag in the path is a 400, as on every other route.
  expect((await del(test, "x".repeat(200))).statusCode).toBe(400);

  // Created again below the max_id it was deleted with: refused (409), naming where it may start.
  const again = await test.server.app.inject({
    method: "POST",
    url: "/api/v1/admin/tags",
    headers: AUTH,
    payload: { tag, step: 100, startId: "1000" },
  });
  expect(again.statusCode, again.body).toBe(409);
  expect(again.json()).toMatchObject({
    code: "ALREADY_EXISTS",
    details: { reason: "deleted", minStartId: "1100" },
  });
  expect(again.json().message).toContain("at least 1100");
}

describe("DELETE /api/v1/admin/tags/:tag", () => {
  it("deletes a tag of the embedded store: 200 with its last max_id, then 404", async () => {
    const test = await startTestServer({
      snowflake: { enabled: false },
      server: { adminToken: ADMIN },
    });
    try {
      await deletesATag(test, "embedded-gone");
      // The demo tag is untouched.
      expect((await get(test.server, "/api/segment/get/leaf-segment-test")).statusCode).toBe(200);
    } finally {
      await test.stop();
    }
  });

  it("deletes a tag of a MariaDB store: the row is gone for every reader, and another node stops serving it at its next refresh", async () => {
    const database = await mysql.createDatabase("leaf_delete");
    const segment = {
      mysql: {
        url: mysql.urlFor(database),
        username: mysql.user,
        password: mysql.password ?? "",
        createTable: true,
      },
      refreshIntervalMs: 1000,
    };
    const first = await startTestServer({
      snowflake: { enabled: false },
      segment,
      server: { adminToken: ADMIN },
    });
    let second: TestServer | undefined;
    try {
      await first.server.app.inject({
        method: "POST",
        url: "/api/v1/admin/tags",
        headers: AUTH,
        payload: { tag: "shared", step: 10 },
      });
      second = await startTestServer({ snowflake: { enabled: false }, segment });
      expect((await get(second.server, "/api/segment/get/shared")).statusCode).toBe(200);

      await deletesATag(first, "mariadb-gone");
      const deleted = await del(first, "shared");
      expect(deleted.statusCode).toBe(200);

      const reader = new MysqlSegmentStore({
        url: mysql.urlFor(database),
        user: mysql.user,
        password: mysql.password ?? "",
      });
      try {
        const tags = (await reader.describeTags()).map((record) => record.tag);
        expect(tags).not.toContain("shared");
        expect(tags).not.toContain("mariadb-gone");
      } finally {
        await reader.close();
      }

      // The other node drops the tag once it re-reads the tag list (every second here).
      const deadline = Date.now() + 60_000;
      let status = 200;
      while (Date.now() < deadline) {
        status = (await get(second.server, "/api/segment/get/shared")).statusCode;
        if (status === 404) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(status).toBe(404);
    } finally {
      await second?.stop();
      await first.stop();
    }
  });
});

/** An admin call to a server process: status and JSON body. */
async function adminCall(
  port: number,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: { ...AUTH, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

describe("DELETE and re-create under load (two server processes, MariaDB)", () => {
  it("answers the final max_id: a tag re-created at maxId + 1 repeats no id either node handed out", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-delete-load-"));
    dirs.push(dir);
    const database = await mysql.createDatabase("leaf_delete_load");
    const url = mysql.urlFor(database);
    const setup = new MysqlSegmentStore({ url, user: mysql.user, password: mysql.password ?? "" });
    await setup.createSchema();
    await setup.createTag({ tag: "t", step: 20, startId: 1n });
    await setup.close();
    const segment = {
      dynamicStep: false,
      refreshIntervalMs: 1000,
      mysql: { url, username: mysql.user, password: mysql.password ?? "" },
    };
    const config = { snowflake: { enabled: false }, segment, server: { adminToken: ADMIN } };
    const a = serverProcess("A", dir, await freePort(), config);
    const b = serverProcess("B", dir, await freePort(), config);
    let loads: Load[] = [];
    const served = () => loads.reduce((n, load) => n + load.ids, 0);
    const rounds: string[] = [];
    let refusedCreates = 0;
    let stalled = 0;
    try {
      await Promise.all([a.start(), b.start()]);
      // A serves the tag; B, the node the admin calls go to, serves it too (a re-created tag at
      // once, from the new row).
      loads = [
        new Load(a.port, "/api/segment/get/t?count=7", 3, 4),
        new Load(b.port, "/api/segment/get/t?count=7", 1, 4),
      ];
      await until("both servers under load", () => loads.every((load) => load.ids >= 2_000));
      for (let round = 0; round < 40; round++) {
        const deleted = await adminCall(b.port, "DELETE", "/api/v1/admin/tags/t");
        expect(deleted.status, JSON.stringify(deleted.json)).toBe(200);
        const startId = (BigInt(deleted.json.maxId as string) + 1n).toString();
        const created = await adminCall(b.port, "POST", "/api/v1/admin/tags", {
          tag: "t",
          step: 20,
          startId,
        });
        rounds.push(`${deleted.json.maxId} -> ${created.status}`);
        if (created.status !== 201) {
          // The answer missed a range: the store refuses the re-create below the tag's final max
          // id and says where it may start (what an operator would do next).
          refusedCreates++;
          const details = created.json.details as { minStartId?: string } | undefined;
          const retried = await adminCall(b.port, "POST", "/api/v1/admin/tags", {
            tag: "t",
            step: 20,
            startId: details?.minStartId,
          });
          expect(retried.status, JSON.stringify(retried.json)).toBe(201);
        }
        // Both take ranges from the new row (A's refresh may also drop and add the tag). A node
        // that finds the max id below a range it took refuses the tag: the wait is bounded.
        const before = served();
        await until("the tag served again", () => served() >= before + 500, 5_000).catch(() => {
          stalled++;
        });
      }
      await sleep(500);
    } finally {
      await Promise.all(loads.map((load) => load.stop()));
      await Promise.all([a.stop(), b.stop()]);
    }
    const counted = countDuplicates(
      loads.map((load) => load.batches.flat().map((id) => BigInt(id))),
    );
    expect({ duplicates: counted.duplicates, examples: counted.examples }).toEqual({
      duplicates: 0,
      examples: [],
    });
    // Every re-create at the answered maxId + 1 was accepted: the answer was final.
    expect(refusedCreates, rounds.join(", ")).toBe(0);
    // And no node found the new row below a range it took (it would have refused the tag).
    expect(stalled).toBe(0);
    expect(counted.total).toBeGreaterThan(20_000);
  }, 300_000);
});
