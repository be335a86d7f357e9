// DELETE /api/v1/admin/tags/:tag against both stores the server runs on: the embedded store and
// MariaDB (a private server from the test kit). The tag's row is gone for every reader of the store,
// this node stops serving it at once, another node at its next refresh, and the answer tells the
// admin the last max_id so that a tag created again can start above it.
import { MysqlSegmentStore } from "@leaf/segment";
import { type MysqlHandle, startMysql, stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { get, startTestServer, type TestServer } from "./helpers";

const ADMIN = "admin-token-0123456789abcdef";
const AUTH = { authorization: `Bearer ${ADMIN}` };

let mysql: MysqlHandle;

beforeAll(async () => {
  mysql = await startMysql({ useEnv: false });
}, 180_000);

afterAll(async () => {
  await stopAll();
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
