import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { layouts } from "@leaf/core";
import { freePort, runNode, stopAll } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { CLI, startCli, text } from "./cli-process";

const dirs: string[] = [];

afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "leaf-server-process-"));
  dirs.push(dir);
  return dir;
}

describe("the server process", () => {
  it("starts with no configuration but a port on the embedded default, prints the URLs to try, and they work", async () => {
    const cwd = tempDir();
    const port = await freePort();
    const server = await startCli(cwd, { LEAF_SERVER_PORT: String(port) });
    try {
      const out = server.output();
      const base = `http://127.0.0.1:${port}`;
      expect(out).toContain(`running on ${base}`);
      expect(out).toContain(`${base}/api/segment/get/leaf-segment-test`);
      expect(out).toContain(`${base}/api/snowflake/get/test`);
      expect(out).toContain(`${base}/monitor`);
      const segment = await text(`${base}/api/segment/get/leaf-segment-test`);
      expect(segment).toEqual({ status: 200, body: "1" });
      const snowflake = await text(`${base}/api/snowflake/get/test`);
      expect(snowflake.status).toBe(200);
      expect(layouts.leaf.decompose(snowflake.body).workerId).toBe(0);
      expect(existsSync(join(cwd, ".leaf-data", "segments"))).toBe(true);
    } finally {
      server.child.kill("SIGTERM");
      expect(await server.exited).toBe(0);
    }
  });

  it("on SIGTERM after the drain finishes the request in flight, refuses new ones, reports the last timestamp, releases the lease and exits 0", async () => {
    const cwd = tempDir();
    const port = await freePort();
    const admin = "admin-token-0123456789abcdef";
    const server = await startCli(cwd, {
      LEAF_SERVER_PORT: String(port),
      LEAF_SERVER_ADMIN_TOKEN: admin,
    });
    const lastId = (await text(`http://127.0.0.1:${port}/api/snowflake/get/x`)).body;

    // A request in flight: headers and half of the body sent; the rest comes after SIGTERM.
    const body = JSON.stringify({ tag: "in-flight", step: 10 });
    const socket = net.connect(port, "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    let response = "";
    socket.setEncoding("utf8").on("data", (chunk: string) => {
      response += chunk;
    });
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    socket.write(
      `POST /api/v1/admin/tags HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`,
    );
    await new Promise((r) => setTimeout(r, 300));
    server.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 300));
    expect(server.child.exitCode).toBeNull();
    // New connections are refused while the request in flight finishes.
    const refused = await fetch(`http://127.0.0.1:${port}/health/live`).then(
      (r) => `status ${r.status}`,
      (e: Error) => `refused: ${(e.cause as Error | undefined)?.message ?? e.message}`,
    );
    expect(refused).toMatch(/^refused|status 503/);
    socket.write(body.slice(10));
    // The server answers and then closes the connection itself: it does not wait for the client.
    await closed;
    expect(response).toMatch(/^HTTP\/1\.1 201 /);
    expect(response).toContain('"tag":"in-flight"');
    expect(await server.exited).toBe(0);
    expect(server.output()).toMatch(/"msg":"stopped"/);

    // The lease is released (lock files gone) and the last report is at or past the last id's time.
    const registry = join(cwd, ".leaf-data", "registry-local", "leaf");
    const files = readdirSync(registry);
    expect(files.filter((f) => f.endsWith(".lock"))).toEqual([]);
    const cache = JSON.parse(
      readFileSync(join(registry, files.find((f) => f.endsWith(".json"))!), "utf8"),
    );
    expect(cache.timestamp).toBeGreaterThanOrEqual(layouts.leaf.decompose(lastId).timestampMs);

    // The same data folder starts again at once, and hands out no id twice.
    const again = await startCli(cwd, { LEAF_SERVER_PORT: String(port) });
    try {
      const next = (await text(`http://127.0.0.1:${port}/api/snowflake/get/x`)).body;
      expect(BigInt(next) > BigInt(lastId)).toBe(true);
    } finally {
      again.child.kill("SIGTERM");
      expect(await again.exited).toBe(0);
    }
  });

  it("starts again after an operator deleted the demo tag, and does not create it again", async () => {
    const cwd = tempDir();
    const port = await freePort();
    const token = "demo-tag-admin-token-0123456789";
    const env = { LEAF_SERVER_PORT: String(port), LEAF_SERVER_ADMIN_TOKEN: token };
    const base = `http://127.0.0.1:${port}`;
    const first = await startCli(cwd, env);
    let deleted: { maxId?: string };
    try {
      expect((await text(`${base}/api/segment/get/leaf-segment-test?count=3`)).body).toBe(
        "1\n2\n3\n",
      );
      const res = await fetch(`${base}/api/v1/admin/tags/leaf-segment-test`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${token}` },
      });
      expect(res.status).toBe(200);
      deleted = (await res.json()) as { maxId?: string };
      expect(deleted.maxId).toBe("2001");
    } finally {
      first.child.kill("SIGTERM");
      expect(await first.exited).toBe(0);
    }
    const again = await startCli(cwd, env);
    try {
      expect(again.output()).toMatch(/demo tag leaf-segment-test was deleted .*not created again/);
      expect(again.output()).not.toContain("/api/segment/get/leaf-segment-test");
      // Still deleted: the tag is not served, and the operator may create it at the answered max id.
      expect((await text(`${base}/api/segment/get/leaf-segment-test`)).status).not.toBe(200);
      const created = await fetch(`${base}/api/v1/admin/tags`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ tag: "leaf-segment-test", step: 2000, startId: deleted.maxId }),
      });
      expect(created.status).toBe(201);
      expect((await text(`${base}/api/segment/get/leaf-segment-test`)).body).toBe("2001");
    } finally {
      again.child.kill("SIGTERM");
      expect(await again.exited).toBe(0);
    }
  });

  it("refuses a second process on the same data folder, with a clear error and a non-zero exit", async () => {
    const cwd = tempDir();
    const first = await startCli(cwd, { LEAF_SERVER_PORT: String(await freePort()) });
    try {
      const second = await runNode(CLI, [], {
        cwd,
        env: { LEAF_SERVER_PORT: String(await freePort()) },
        timeoutMs: 30_000,
      });
      expect(second.code).toBe(1);
      expect(second.stderr).toMatch(
        /segment mode \(embedded store in .*\) could not start: .*lock file .* is held by pid/,
      );
    } finally {
      first.child.kill("SIGTERM");
      expect(await first.exited).toBe(0);
    }
  });

  it("exits non-zero naming the key for a bad configuration file, and for a bad environment variable", async () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, "leaf.properties"), "leaf.name=test\nleaf.snowflake.mode=zookeeper\n");
    const bad = await runNode(CLI, ["--config", "leaf.properties"], { cwd, timeoutMs: 30_000 });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("invalid leaf.snowflake.mode");
    expect(bad.stderr).toContain("leaf.properties line 2");
    const port = await runNode(CLI, ["--check"], {
      cwd,
      env: { LEAF_SERVER_PORT: "99999" },
      timeoutMs: 30_000,
    });
    expect(port.code).toBe(1);
    expect(port.stderr).toContain("invalid LEAF_SERVER_PORT (environment)");
    const password = await runNode(CLI, ["--check"], {
      cwd,
      env: { LEAF_JDBC_URL: "jdbc:mysql://127.0.0.1:3306/leaf", LEAF_JDBC_USERNAME: "leaf" },
      timeoutMs: 30_000,
    });
    expect(password.code).toBe(1);
    expect(password.stderr).toContain("missing segment.mysql.password / leaf.jdbc.password");
    const ok = await runNode(CLI, ["--check", "--config", "leaf.properties"], {
      cwd,
      env: { LEAF_SNOWFLAKE_REGISTRY: "local", LEAF_SEGMENT_STORE: "embedded" },
      timeoutMs: 30_000,
    });
    expect(ok.stdout).toContain("configuration OK");
    expect(ok.code).toBe(0);
    const typo = await runNode(CLI, ["--check"], {
      cwd,
      env: { LEAF_SEGMNT_STORE: "embedded" },
      timeoutMs: 30_000,
    });
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain("LEAF_SEGMNT_STORE (did you mean LEAF_SEGMENT_STORE?)");
    const usage = await runNode(CLI, ["--bogus"], { cwd, timeoutMs: 30_000 });
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("unknown argument --bogus");
  });

  it("exits non-zero with the key named when a configured database cannot be reached", async () => {
    const cwd = tempDir();
    const closedPort = await freePort();
    const run = await runNode(CLI, [], {
      cwd,
      env: {
        LEAF_SERVER_PORT: String(await freePort()),
        LEAF_SEGMENT_MYSQL_URL: `mysql://root@127.0.0.1:${closedPort}/leaf`,
        LEAF_SEGMENT_MYSQL_PASSWORD: "",
        LEAF_SNOWFLAKE_ENABLED: "false",
      },
      timeoutMs: 60_000,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("segment mode could not start");
    expect(run.stderr).toContain(`127.0.0.1:${closedPort}`);
  });
});

describe("leaf decode", () => {
  it("takes Leaf's test vector apart", async () => {
    const run = await runNode(CLI, ["decode", "1256557484213448722"], { timeoutMs: 30_000 });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("2020-05-02T12:13:44.602Z (1588421624602 ms)");
    expect(run.stdout).toMatch(/worker id\s+619/);
    expect(run.stdout).toMatch(/sequence\s+18/);
  });

  it("decodes with another epoch or layout, and as JSON", async () => {
    const epoch = await runNode(CLI, ["decode", "1256557484213448722", "--epoch", "0", "--json"], {
      timeoutMs: 30_000,
    });
    expect(epoch.code).toBe(0);
    expect(JSON.parse(epoch.stdout)).toMatchObject({
      timestampMs: 1588421624602 - 1288834974657,
      workerId: 619,
      epoch: 0,
    });
    const redis = await runNode(
      CLI,
      ["decode", "202401020304050000170003", "--layout", "redis-sequence"],
      { timeoutMs: 30_000 },
    );
    expect(redis.stdout).toMatch(/shard\s+3/);
    expect(redis.stdout).toContain("2024-01-02T03:04:05.000Z");
  });

  it("reads a redis-sequence string id in the time zone it was made in", async () => {
    const id = "202401020304050000170003";
    const utc = await runNode(CLI, ["decode", id, "--layout", "redis-sequence"], {
      timeoutMs: 30_000,
    });
    expect(utc.stdout).toContain("2024-01-02T03:04:05.000Z");
    expect(utc.stdout).toContain("(time zone UTC)");
    const flag = await runNode(
      CLI,
      ["decode", id, "--layout", "redis-sequence", "--time-zone", "+08:00", "--json"],
      { timeoutMs: 30_000 },
    );
    expect(JSON.parse(flag.stdout)).toMatchObject({
      time: "2024-01-01T19:04:05.000Z",
      timeZone: "+08:00",
      shard: 3,
      sequence: 17,
    });
    // Without the flag, the configured zone (as the server that made the id uses it).
    const configured = await runNode(CLI, ["decode", id, "--layout", "redis-sequence"], {
      env: { LEAF_REDIS_SEQUENCE_TIME_ZONE: "Asia/Shanghai" },
      timeoutMs: 30_000,
    });
    expect(configured.stdout).toContain("2024-01-01T19:04:05.000Z");
    expect(configured.stdout).toContain("(time zone Asia/Shanghai)");
    const bad = await runNode(
      CLI,
      ["decode", id, "--layout", "redis-sequence", "--time-zone", "Mars/Base"],
      { timeoutMs: 30_000 },
    );
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--time-zone must be "UTC", an offset such as "+08:00"');
    const notRedis = await runNode(CLI, ["decode", "1", "--time-zone", "+08:00"], {
      timeoutMs: 30_000,
    });
    expect(notRedis.code).toBe(2);
    expect(notRedis.stderr).toContain("--time-zone applies to redis-sequence ids");
  });

  it("refuses a bad id or bad options with a clear message and a non-zero exit", async () => {
    const bad = await runNode(CLI, ["decode", "12x"], { timeoutMs: 30_000 });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('invalid id "12x"');
    const missing = await runNode(CLI, ["decode"], { timeoutMs: 30_000 });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("decode needs an ID");
    const epoch = await runNode(CLI, ["decode", "1", "--epoch", "soon"], { timeoutMs: 30_000 });
    expect(epoch.code).toBe(2);
    expect(epoch.stderr).toContain("--epoch must be ms since 1970");
  });
});
