// Readiness as a load balancer uses it: a new node with the default lazy loading is ready as soon
// as it listens, although no tag has a range yet, and stays ready under load; each tag's state
// (lazy, ready, used up, ...) is reported per tag in the health detail, the metrics and the
// monitor's data, never as the node's readiness.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_ID } from "@leaf/segment";
import { MysqlSegmentStore } from "@leaf/segment-mysql";
import { type MysqlHandle, startMysql, stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LeafServer, loadConfig, startServer } from "../src/index";
import { merge } from "./helpers";

let mysql: MysqlHandle;
const dirs: string[] = [];

beforeAll(async () => {
  mysql = await startMysql({ useEnv: false });
});
afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A database with a leaf_alloc table holding `tags`. */
async function tableWith(tags: Array<{ tag: string; step: number; startId: bigint }>) {
  const database = await mysql.createDatabase("leaf_ready");
  const store = new MysqlSegmentStore({
    url: mysql.urlFor(database),
    user: mysql.user,
    password: mysql.password,
  });
  try {
    await store.createSchema();
    for (const t of tags) await store.createTag(t);
  } finally {
    await store.close();
  }
  return database;
}

/** A server on the MySQL store of `database`, with the default load policy unless overridden. */
async function serverOn(database: string, segment: Record<string, unknown> = {}) {
  const dir = mkdtempSync(join(tmpdir(), "leaf-ready-"));
  dirs.push(dir);
  const config = loadConfig({
    values: merge(
      {
        server: { host: "127.0.0.1", port: 0, drainMs: 0 },
        dataDir: dir,
        snowflake: { enabled: false },
        segment: {
          mysql: {
            url: mysql.urlFor(database),
            username: mysql.user,
            password: mysql.password ?? "",
          },
        },
      },
      { segment },
    ),
    env: {},
  });
  return startServer(config, { logger: false });
}

interface Ready {
  ready: boolean;
  checks: {
    segment: {
      ready: boolean;
      detail: string;
      tags: Record<string, number>;
      attention: Array<{ tag: string; state: string; reason: string }>;
    };
  };
}

async function ready(server: LeafServer): Promise<{ status: number; body: Ready }> {
  const res = await fetch(`${server.url}/health/ready`);
  return { status: res.status, body: (await res.json()) as Ready };
}

async function metric(server: LeafServer, name: string, labels: string): Promise<string | null> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? null : line.slice(line.lastIndexOf(" ") + 1);
}

describe("readiness", () => {
  it("is ready at once on a new node whose tags wait for their first request, and stays ready under load", async () => {
    const database = await tableWith([
      { tag: "orders", step: 1000, startId: 1n },
      { tag: "cold", step: 1000, startId: 1n },
    ]);
    const server = await serverOn(database);
    try {
      // Nothing is loaded (lazy is the default), and the node is ready.
      const first = await ready(server);
      expect(first.status).toBe(200);
      expect(first.body.checks.segment.tags).toMatchObject({ lazy: 2, ready: 0 });
      // A balancer polls readiness every 20 ms while clients ask for ids of one tag only.
      let polls = 0;
      const notReady: string[] = [];
      let loading = true;
      const poller = (async () => {
        while (loading) {
          const r = await ready(server);
          polls++;
          if (r.status !== 200) notReady.push(JSON.stringify(r.body));
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      })();
      let ids = 0;
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          for (let i = 0; i < 300; i++) {
            const res = await fetch(`${server.url}/api/segment/get/orders`);
            expect(res.status).toBe(200);
            await res.text();
            ids++;
          }
        }),
      );
      loading = false;
      await poller;
      expect(ids).toBe(1200);
      expect(polls).toBeGreaterThan(0);
      expect(notReady).toEqual([]);
      const after = await ready(server);
      expect(after.body.checks.segment.tags).toMatchObject({ lazy: 1, ready: 1 });
      expect(after.body.checks.segment.detail).toMatch(/serving 2 tag\(s\) .*1 ready, 1 lazy/);
      // Per tag: in the metrics and the monitor's data.
      expect(await metric(server, "leaf_segment_tag_state", 'tag="cold",state="lazy"')).toBe("1");
      expect(await metric(server, "leaf_segment_tag_state", 'tag="orders",state="ready"')).toBe(
        "1",
      );
      const monitor = (await (await fetch(`${server.url}/api/v1/monitor`)).json()) as {
        ready: boolean;
        segment: { tags: Array<{ tag: string; state: string }> };
      };
      expect(monitor.ready).toBe(true);
      expect(monitor.segment.tags.map((t) => [t.tag, t.state])).toEqual([
        ["cold", "lazy"],
        ["orders", "ready"],
      ]);
    } finally {
      await server.close();
    }
  });

  it("stays ready with a used-up tag, also when that tag is loaded at start after a restart", async () => {
    const database = await tableWith([
      { tag: "orders", step: 1000, startId: 1n },
      // No range of 10 fits below 2^63 - 1.
      { tag: "done", step: 10, startId: MAX_ID - 5n },
    ]);
    const server = await serverOn(database);
    try {
      const res = await fetch(`${server.url}/api/segment/get/done`);
      expect(res.status).toBe(410);
      expect(await res.text()).toMatch(
        /^Result\{id=-3, status=EXCEPTION\}\nTAG_EXHAUSTED: \[leaf\] \[segment\] tag "done" is used up/,
      );
      const r = await ready(server);
      expect(r.status).toBe(200);
      expect(r.body.checks.segment.tags).toMatchObject({ exhausted: 1, lazy: 1 });
      expect(r.body.checks.segment.attention).toEqual([
        expect.objectContaining({ tag: "done", state: "exhausted" }),
      ]);
      expect(
        await metric(server, "leaf_segment_tag_refused", 'tag="done",reason="exhausted"'),
      ).toBe("1");
      expect(await metric(server, "leaf_segment_tag_state", 'tag="done",state="exhausted"')).toBe(
        "1",
      );
    } finally {
      await server.close();
    }
    // A restart that loads the used-up tag at start: the node is ready all the same.
    const again = await serverOn(database, { eagerTags: ["done", "orders"] });
    try {
      const r = await ready(again);
      expect(r.status).toBe(200);
      expect(r.body.checks.segment.tags).toMatchObject({ exhausted: 1, ready: 1 });
      expect((await fetch(`${again.url}/api/v1/segment/orders/id`)).status).toBe(200);
    } finally {
      await again.close();
    }
  });
});
