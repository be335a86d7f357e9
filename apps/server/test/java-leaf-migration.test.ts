// A team leaving Java Leaf, step by step: its leaf_alloc.sql (verbatim, with the README's demo row)
// on MariaDB, a ZooKeeper tree Curator wrote, its leaf.properties keys, and a real server process.
// Checks issue 12's items against Java Leaf's behaviour: the port opens only when ready, every
// interface, ranges 2000/2000/4000, POST on Java's paths, Java's cache file, lazy first load, and
// the refusals of a Java file that would make two nodes hand out the same ids.
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { layouts, localIPv4 } from "@leaf/core";
import { MysqlSegmentStore } from "@leaf/segment-mysql";
import {
  freePort,
  type MysqlHandle,
  runNode,
  spawnNode,
  startMysql,
  startZookeeper,
  stopAll,
  type ZookeeperHandle,
} from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { CLI } from "./cli-process";

// The test kit's clients for MariaDB and ZooKeeper (the server itself needs neither), typed here
// for what this test uses.
interface SqlConnection {
  query(sql: string): Promise<unknown>;
  end(): Promise<void>;
}
type Callback = (error: Error | null | undefined) => void;
interface ZkClient {
  once(event: "connected", listener: () => void): void;
  connect(): void;
  mkdirp(path: string, callback: Callback): void;
  create(path: string, data: Buffer, mode: number, callback: Callback): void;
  close(): void;
}
const kitRequire = createRequire(import.meta.resolve("@leaf/testkit"));
const mysql2 = kitRequire("mysql2/promise") as {
  createConnection(options: object): Promise<SqlConnection>;
};
const zookeeper = kitRequire("node-zookeeper-client") as {
  createClient(connectString: string): ZkClient;
  CreateMode: { PERSISTENT_SEQUENTIAL: number };
};

/** Java Leaf's scripts/leaf_alloc.sql as it is, then the demo row of its README. */
const LEAF_ALLOC_SQL = readFileSync(
  new URL("./fixtures/java-leaf-alloc.sql", import.meta.url),
  "utf8",
);
const IDLE_TAGS = 200;
const IDLE_STEP = 1_000_000;

let db: MysqlHandle;
let zk: ZookeeperHandle;
let database: string;
let sql: SqlConnection;
const dirs: string[] = [];
const children: ChildProcess[] = [];

beforeAll(async () => {
  [db, zk] = await Promise.all([startMysql({ useEnv: false }), startZookeeper()]);
  database = await db.createDatabase("leaf");
  sql = await mysql2.createConnection({
    ...db.connectionOptions(database),
    multipleStatements: true,
  });
  await sql.query(LEAF_ALLOC_SQL);
  // The tag the start-up probes ask for (the demo row's ids are counted by the first test).
  await sql.query("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('probe', 1, 10)");
}, 120_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  await sql?.end().catch(() => {});
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "leaf-java-migration-"));
  dirs.push(dir);
  return dir;
}

/** Java Leaf's leaf.properties keys, in its order, with this test's addresses. */
function leafProperties(keys: {
  name: string;
  segment: boolean;
  jdbcUrl?: string;
  snowflake: boolean;
  zkAddress?: string;
  snowflakePort?: number;
}): string {
  const line = (key: string, value: string | undefined) =>
    value === undefined ? `#${key}=` : `${key}=${value}`;
  return [
    `leaf.name=${keys.name}`,
    `leaf.segment.enable=${keys.segment}`,
    line("leaf.jdbc.url", keys.jdbcUrl),
    line("leaf.jdbc.username", keys.jdbcUrl && db.user),
    line("leaf.jdbc.password", keys.jdbcUrl && (db.password ?? "")),
    "",
    `leaf.snowflake.enable=${keys.snowflake}`,
    line("leaf.snowflake.zk.address", keys.zkAddress),
    line("leaf.snowflake.port", keys.snowflakePort?.toString()),
    "",
  ].join("\n");
}

function jdbcUrl(): string {
  return `jdbc:mysql://${db.host}:${db.port}/${database}?useUnicode=true&characterEncoding=utf8`;
}

/** Max id of every row, through the segment store's own read (Java Leaf's /db page). */
async function maxIds(): Promise<Map<string, bigint>> {
  const store = new MysqlSegmentStore({ url: db.urlFor(database) });
  try {
    return new Map((await store.describeTags()).map((r) => [r.tag, r.maxId]));
  } finally {
    await store.close();
  }
}

/** What one probe of the port saw: an HTTP status, or the connection error's code. */
async function probe(url: string, method = "GET"): Promise<string> {
  try {
    const res = await fetch(url, { method, signal: AbortSignal.timeout(10_000) });
    await res.text();
    return String(res.status);
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause;
    return cause?.code ?? (error as Error).name;
  }
}

/**
 * Starts the CLI with `file` and probes Java Leaf's two paths from the moment it is spawned until
 * both answer 200: what every probe saw, and the process.
 */
async function startProbed(file: string, port: number, env: Record<string, string>) {
  const child = spawnNode(CLI, ["--config", file], {
    env: { LEAF_SERVER_PORT: String(port), LEAF_SERVER_DRAIN_MS: "0", ...env },
  });
  children.push(child);
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => {
    output += c;
  });
  child.stderr!.setEncoding("utf8").on("data", (c: string) => {
    output += c;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
  const seen: string[] = [];
  const base = `http://127.0.0.1:${port}`;
  const deadline = performance.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the server exited early:\n${output}`);
    if (performance.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(
        `the server did not serve within 90 s (last answers ${seen.slice(-4).join(", ")}):\n${output}`,
      );
    }
    const answers = await Promise.all([
      probe(`${base}/api/segment/get/probe`),
      probe(`${base}/api/snowflake/get/probe`),
    ]);
    seen.push(...answers);
    if (answers.every((a) => a === "200")) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  await vi.waitFor(() => expect(output).toContain("Stop with Ctrl-C"), { timeout: 30_000 });
  return {
    base,
    seen,
    output: () => output,
    stop: () => {
      child.kill("SIGTERM");
      return exited;
    },
  };
}

describe("a Java Leaf deployment moved to this server", () => {
  it("serves Java Leaf's table, tree and keys as Java Leaf does (issue 12 items 1-6)", async () => {
    // Java Leaf's table with its demo row, the probes' tag, and many idle tags with large steps
    // that nobody touched for two days.
    const idle = Array.from({ length: IDLE_TAGS }, (_, i) => `idle-${i}`);
    await sql.query(
      `INSERT INTO leaf_alloc (biz_tag, max_id, step, update_time) VALUES ${idle
        .map((t) => `('${t}', 1, ${IDLE_STEP}, NOW() - INTERVAL 2 DAY)`)
        .join(", ")}`,
    );

    // The ZooKeeper tree as Java Leaf's Curator left it: parents created empty, one persistent
    // sequential node per ip:port, data {"ip","port","timestamp"}. This server replaces the third.
    const name = `com.sankuai.leaf.opensource.test.${process.pid}`;
    const port = await freePort();
    const ip = localIPv4();
    const forever = `/snowflake/${name}/forever`;
    const lastWeek = Date.now() - 7 * 24 * 3600_000;
    const client = zookeeper.createClient(zk.connectString);
    await new Promise<void>((resolve) => {
      client.once("connected", () => resolve());
      client.connect();
    });
    try {
      await new Promise<void>((resolve, reject) =>
        client.mkdirp(forever, (e) => (e ? reject(e) : resolve())),
      );
      for (const [nodeIp, nodePort] of [
        ["10.7.0.1", 8080],
        ["10.7.0.2", 8080],
        [ip, port],
        ["10.7.0.3", 8080],
      ] as const) {
        const data = JSON.stringify({ ip: nodeIp, port: String(nodePort), timestamp: lastWeek });
        await new Promise<void>((resolve, reject) =>
          client.create(
            `${forever}/${nodeIp}:${nodePort}-`,
            Buffer.from(data),
            zookeeper.CreateMode.PERSISTENT_SEQUENTIAL,
            (e) => (e ? reject(e) : resolve()),
          ),
        );
      }
    } finally {
      client.close();
    }

    const dir = tempDir();
    const file = join(dir, "leaf.properties");
    writeFileSync(
      file,
      leafProperties({
        name,
        segment: true,
        jdbcUrl: jdbcUrl(),
        snowflake: true,
        zkAddress: zk.connectString,
        snowflakePort: port,
      }),
    );
    const before = await maxIds();
    // TMPDIR: where Java Leaf's {java.io.tmpdir}/{leaf.name}/leafconf/{port}/ cache folder lives.
    // segment.prefetchMaxDepth=1: Java Leaf's double buffer, so that the ranges below are Java's (the
    // deeper prefetch is a documented difference; see the server README).
    const server = await startProbed(file, port, {
      LEAF_DATA_DIR: join(dir, "data"),
      TMPDIR: dir,
      LEAF_SEGMENT_PREFETCH_MAX_DEPTH: "1",
    });
    try {
      // 1. The port opens only when both modes serve: every probe was refused or answered 200.
      expect(server.seen.filter((s) => s !== "ECONNREFUSED" && s !== "200")).toEqual([]);
      expect(server.seen).toContain("ECONNREFUSED");

      // 2. Every interface, as Spring Boot, and the banner says why (probes stay on loopback).
      expect(server.output()).toMatch(/listening on +0\.0\.0\.0: every interface, as Java Leaf/);

      // Worker id of this ip:port's node in the Curator tree (the third: 2).
      const snowflakeId = await (await fetch(`${server.base}/api/snowflake/get/x`)).text();
      expect(layouts.leaf.decompose(snowflakeId).workerId).toBe(2);

      // 6. Lazy first load, as Java Leaf (the default): no tag took a range at start, not even the
      // demo row; only the probe tag, at its first request. The first request of a tag loads it.
      const started = await maxIds();
      for (const tag of idle) expect(started.get(tag), tag).toBe(before.get(tag));
      expect(started.get("leaf-segment-test")).toBe(before.get("leaf-segment-test"));
      const first = await fetch(`${server.base}/api/segment/get/idle-7`);
      expect(await first.text()).toBe("1");
      expect((await maxIds()).get("idle-7")).toBe(1n + BigInt(IDLE_STEP));

      // 3. Java Leaf's ranges: 2000, then 2000 again, then 4000; max_id 4001 after 2100 ids.
      const batch = async (count: number) => {
        const res = await fetch(
          `${server.base}/api/v1/segment/leaf-segment-test/ids?count=${count}`,
        );
        expect(res.status).toBe(200);
        return ((await res.json()) as { ids: string[] }).ids;
      };
      const ids = await batch(2100);
      expect(ids[0]).toBe("1");
      expect(ids[2099]).toBe("2100");
      await vi.waitFor(async () => expect((await maxIds()).get("leaf-segment-test")).toBe(4001n), {
        timeout: 20_000,
      });
      await batch(101); // 10% into the second range: the third load, doubled.
      await vi.waitFor(async () => expect((await maxIds()).get("leaf-segment-test")).toBe(8001n), {
        timeout: 20_000,
      });

      // 4. Java Leaf's paths answer POST (@RequestMapping takes every method).
      const posted = await fetch(`${server.base}/api/segment/get/leaf-segment-test`, {
        method: "POST",
      });
      expect(posted.status).toBe(200);
      expect(await posted.text()).toBe("2202");
      const postedSnowflake = await fetch(`${server.base}/api/snowflake/get/x`, { method: "POST" });
      expect(layouts.leaf.decompose(await postedSnowflake.text()).workerId).toBe(2);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 180_000);

  it("starts from Java Leaf's workerID.properties when ZooKeeper is down (item 5)", async () => {
    const dir = tempDir();
    const port = await freePort();
    const name = `com.sankuai.leaf.opensource.cache.${process.pid}`;
    // Java Leaf wrote its cache file on its last start with ZooKeeper reachable, a minute ago.
    const folder = join(dir, name, "leafconf", String(port));
    mkdirSync(folder, { recursive: true });
    const javaFile = join(folder, "workerID.properties");
    writeFileSync(javaFile, "#Wed May 01 10:00:00 CST 2024\nworkerID=9\n");
    const aMinuteAgo = new Date(Date.now() - 60_000);
    utimesSync(javaFile, aMinuteAgo, aMinuteAgo);
    const file = join(dir, "leaf.properties");
    writeFileSync(
      file,
      leafProperties({
        name,
        segment: true,
        jdbcUrl: jdbcUrl(),
        snowflake: true,
        zkAddress: `127.0.0.1:${await freePort()}`,
        snowflakePort: port,
      }),
    );
    // segment.prefetchMaxDepth=1: Java Leaf's double buffer, so that the ranges below are Java's (the
    // deeper prefetch is a documented difference; see the server README).
    const server = await startProbed(file, port, {
      LEAF_DATA_DIR: join(dir, "data"),
      TMPDIR: dir,
      LEAF_SEGMENT_PREFETCH_MAX_DEPTH: "1",
    });
    try {
      const id = await (await fetch(`${server.base}/api/snowflake/get/x`)).text();
      expect(layouts.leaf.decompose(id).workerId).toBe(9);
      expect(server.seen.filter((s) => s !== "ECONNREFUSED" && s !== "200")).toEqual([]);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 180_000);

  it("refuses a Java file that would let two nodes hand out the same ids, naming the key (items 7, 8)", async () => {
    const dir = tempDir();
    const run = async (text: string, env: Record<string, string> = {}) => {
      const file = join(
        dir,
        `leaf-${dirs.length}-${Math.random().toString(36).slice(2)}.properties`,
      );
      writeFileSync(file, text);
      return runNode(CLI, ["--config", file], {
        env: {
          LEAF_SERVER_PORT: String(await freePort()),
          LEAF_DATA_DIR: join(dir, "data"),
          ...env,
        },
        timeoutMs: 60_000,
      });
    };
    // Segment keys only: Java Leaf's snowflake mode is on by default and needs ZooKeeper; no local
    // worker id 0 instead.
    const segmentOnly = [
      "leaf.name=com.sankuai.leaf.opensource.test",
      "leaf.segment.enable=true",
      `leaf.jdbc.url=${jdbcUrl()}`,
      `leaf.jdbc.username=${db.user}`,
      `leaf.jdbc.password=${db.password ?? ""}`,
      "",
    ].join("\n");
    const noZk = await run(segmentOnly);
    expect(noZk.code).toBe(1);
    expect(noZk.stderr).toContain("leaf.snowflake.zk.address");

    // Segment mode without a JDBC URL: no embedded store unless asked for.
    const noUrl = leafProperties({
      name: "com.sankuai.leaf.opensource.test",
      segment: true,
      snowflake: false,
    });
    const embedded = await run(noUrl);
    expect(embedded.code).toBe(1);
    expect(embedded.stderr).toContain("segment.store");
    writeFileSync(join(dir, "confirmed.properties"), noUrl);
    // Confirmed for one single node: accepted.
    const ok = await runNode(CLI, ["--check", "--config", join(dir, "confirmed.properties")], {
      env: { LEAF_SEGMENT_STORE: "embedded", LEAF_DATA_DIR: join(dir, "data") },
      timeoutMs: 60_000,
    });
    expect(ok.code).toBe(0);
  }, 180_000);

  it("names the key that sets the port when the port is taken (item 11)", async () => {
    const dir = tempDir();
    const taken = net.createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => taken.listen(port, "0.0.0.0", () => resolve()));
    try {
      const file = join(dir, "leaf.properties");
      writeFileSync(
        file,
        leafProperties({
          name: "com.sankuai.leaf.opensource.test",
          segment: true,
          jdbcUrl: jdbcUrl(),
          snowflake: false,
        }),
      );
      const result = await runNode(CLI, ["--config", file], {
        env: { LEAF_SERVER_PORT: String(port), LEAF_DATA_DIR: join(dir, "data") },
        timeoutMs: 60_000,
      });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`port ${port}`);
      expect(result.stderr).toContain("server.port");
      expect(result.stderr).not.toMatch(/^\s+at /m);
    } finally {
      await new Promise((r) => taken.close(r));
    }
  }, 120_000);
});
