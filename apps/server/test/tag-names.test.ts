// Tags named like Object.prototype's members ("__proto__", "constructor", ...) are legal tags: every
// answer that lists tags (admin list, high-water marks, monitor state, metrics, readiness) names
// them like any other, and their ids never repeat across a restart of the embedded store.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { countDuplicates } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LeafServer, loadConfig, startServer } from "../src/index";

const ADMIN = "tag-names-admin-token-0123";
const NAMES = ["__proto__", "constructor", "hasOwnProperty", "toString", "valueOf"];
const dir = mkdtempSync(join(tmpdir(), "leaf-tag-names-"));
const auth = { authorization: `Bearer ${ADMIN}` };

function start(): Promise<LeafServer> {
  const config = loadConfig({
    values: {
      dataDir: dir,
      server: { host: "127.0.0.1", port: 0, drainMs: 0, adminToken: ADMIN },
      snowflake: { enabled: false },
      segment: { demoTag: "" },
    },
    env: {},
  });
  return startServer(config, { logger: false });
}

async function json(server: LeafServer, url: string): Promise<unknown> {
  const res = await server.app.inject({ method: "GET", url, headers: auth });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** `count` ids of `tag` from the Java Leaf path, as strings. */
async function ids(server: LeafServer, tag: string, count: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await server.app.inject({ method: "GET", url: `/api/segment/get/${tag}` });
    expect(res.statusCode, res.body).toBe(200);
    out.push(res.body);
  }
  return out;
}

let server: LeafServer;
const before = new Map<string, string[]>();

beforeAll(async () => {
  server = await start();
  for (const tag of NAMES) {
    const res = await server.app.inject({
      method: "POST",
      url: "/api/v1/admin/tags",
      headers: auth,
      payload: { tag, step: 100 },
    });
    expect(res.statusCode, res.body).toBe(201);
    before.set(tag, await ids(server, tag, 150));
  }
}, 60_000);

afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("tags named like Object.prototype's members", () => {
  it("are listed by the admin API, the high-water marks, the monitor state and readiness", async () => {
    const tags = (await json(server, "/api/v1/admin/tags")) as { tags: Array<{ tag: string }> };
    const listed = JSON.stringify(tags);
    for (const tag of NAMES) expect(listed).toContain(JSON.stringify(tag));
    const marks = (await json(server, "/api/v1/admin/high-water")) as {
      marks: Array<{ tag: string; highWater: string; seen: string | null }>;
    };
    expect(marks.marks.map((m) => m.tag).sort()).toEqual([...NAMES].sort());
    // No refresh read the rows since the tags were created: nothing seen yet.
    for (const m of marks.marks) expect(m.seen).toBeNull();
    const monitor = (await json(server, "/api/v1/monitor")) as {
      segment: { tags: Array<{ tag: string }> };
      capacity: { tags: Array<{ tag: string }> };
    };
    expect(monitor.segment.tags.map((t) => t.tag).sort()).toEqual([...NAMES].sort());
    expect(monitor.capacity.tags.map((t) => t.tag).sort()).toEqual([...NAMES].sort());
    const ready = await server.app.inject({ method: "GET", url: "/health/ready" });
    expect(ready.statusCode).toBe(200);
  });

  it("are labelled in the metrics", async () => {
    const res = await server.app.inject({ method: "GET", url: "/metrics" });
    for (const tag of NAMES) expect(res.body).toContain(`tag="${tag}"`);
  });

  it("never repeat an id across a restart", async () => {
    await server.close();
    server = await start();
    for (const tag of NAMES) {
      const after = await ids(server, tag, 150);
      expect({ tag, ...countDuplicates([before.get(tag)!, after]) }).toMatchObject({
        tag,
        duplicates: 0,
        total: 300,
      });
    }
  });
});
