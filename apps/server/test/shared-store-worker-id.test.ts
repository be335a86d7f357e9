// Issue 24 item 5: two servers on one host (127.0.0.1) sharing a MySQL segment store, set by LEAF_*
// environment variables, with snowflake mode on and no worker id configured. Each would take the
// local registry's default worker id 0 and hand out the same snowflake ids; both must refuse to
// start, naming the key to set. With an explicit id a server starts, and its banner shows no demo
// tag (that tag exists only in the embedded store).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSchema, MysqlSegmentStore } from "@leaf/segment-mysql";
import {
  countDuplicates,
  freePort,
  LeafServerProcess,
  type MysqlHandle,
  startMysql,
  stopAll,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI } from "./cli-process";
import { Load, until } from "./fault-servers";

const dirs: string[] = [];
let mysql: MysqlHandle;

beforeAll(async () => {
  mysql = await startMysql();
}, 180_000);

afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A server on 127.0.0.1 (the kit's default host) whose store comes from LEAF_* variables only. */
async function server(label: string, dir: string, env: Record<string, string>) {
  return new LeafServerProcess({
    cli: CLI,
    label,
    dir,
    port: await freePort(),
    config: { server: { drainMs: 0 } },
    env,
    readyTimeoutMs: 60_000,
  });
}

/** A fresh database with the leaf_alloc table and one tag, and the variables that name it. */
async function sharedStore(name: string): Promise<Record<string, string>> {
  const database = await mysql.createDatabase(name);
  const store = { url: mysql.urlFor(database), user: mysql.user, password: mysql.password ?? "" };
  await createSchema(store);
  const segments = new MysqlSegmentStore(store);
  await segments.createTag({ tag: "orders", step: 1000, description: "shared" });
  await segments.close();
  return {
    LEAF_NAME: name,
    LEAF_SEGMENT_MYSQL_URL: store.url,
    LEAF_SEGMENT_MYSQL_USERNAME: store.user,
    LEAF_SEGMENT_MYSQL_PASSWORD: store.password,
  };
}

describe("two servers on one host sharing a MySQL segment store", () => {
  it("refuse to start on 127.0.0.1 without a worker id, naming the key to set", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-shared-store-"));
    dirs.push(dir);
    const env = await sharedStore("leaf_default_id");
    const a = await server("A", dir, env);
    const b = await server("B", dir, env);
    const outcomes = await Promise.all([a.tryStart(), b.tryStart()]);
    if (outcomes.every((o) => o.started)) {
      // Without the guard: both serve snowflake ids under worker id 0. Count what that costs.
      const loads = [a, b].map((s) => new Load(s.port, "/api/snowflake/get/x?count=1000", 2, 4));
      await until("both servers under load", () => loads.every((l) => l.ids >= 50_000));
      await Promise.all(loads.map((l) => l.stop()));
      const count = countDuplicates(loads.flatMap((l) => l.batches));
      expect.fail(
        `both servers started with the default worker id: ${count.duplicates} duplicate snowflake ids in ${count.total}`,
      );
    }
    for (const outcome of outcomes) {
      expect(outcome.started).toBe(false);
      if (outcome.started) continue;
      expect(outcome.code).toBe(1);
      expect(outcome.output).toContain("INVALID_CONFIG");
      expect(outcome.output).toContain("local registry's default worker id 0");
      expect(outcome.output).toContain("LEAF_SEGMENT_MYSQL_URL (environment)");
      expect(outcome.output).toContain("LEAF_SNOWFLAKE_LOCAL_WORKER_ID");
    }
  }, 180_000);

  it("start with explicit worker ids, and the banner shows no embedded demo tag", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-shared-store-"));
    dirs.push(dir);
    const env = await sharedStore("leaf_explicit_id");
    const a = await server("A", dir, { ...env, LEAF_SNOWFLAKE_LOCAL_WORKER_ID: "1" });
    const b = await server("B", dir, { ...env, LEAF_SNOWFLAKE_LOCAL_WORKER_ID: "2" });
    await Promise.all([a.start(), b.start()]);
    const loads = [a, b].map((s) => new Load(s.port, "/api/snowflake/get/x?count=1000", 2, 4));
    await until("both servers under load", () => loads.every((l) => l.ids >= 50_000));
    await Promise.all(loads.map((l) => l.stop()));
    expect(countDuplicates(loads.flatMap((l) => l.batches)).duplicates).toBe(0);
    for (const s of [a, b]) {
      expect(s.output).toContain("segment id");
      expect(s.output).not.toContain("leaf-segment-test");
    }
    await Promise.all([a.stop(), b.stop()]);
  }, 180_000);
});
