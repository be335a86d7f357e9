// A cache between the clients and the server must never hand out an answer twice. nginx in front of
// a real server with `proxy_cache` and `proxy_cache_valid 200 404 1m` (a common "cache what the
// upstream answers" setup, as a CDN or Varnish's default TTL would be): every path that hands out
// ids, ranges or batches is asked twice through it and must answer two different ones, because
// every answer of the server carries `Cache-Control: no-store`, which such a cache honours. Without
// that header nginx answered the second GET /api/snowflake/get/:key from its cache, the same id.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, stopAll, waitUntil } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { startCli } from "./cli-process";
import { startProxy } from "./proxy-process";

const dirs: string[] = [];
const stops: Array<() => void> = [];
afterAll(async () => {
  for (const stop of stops) stop();
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** nginx (installed by scripts/install-services.sh) on `port`, caching what `backend` answers. */
function cachingNginx(dir: string, port: number, backend: number) {
  const at = (name: string) => join(dir, name);
  mkdirSync(at("cache"));
  const file = at("nginx.conf");
  writeFileSync(
    file,
    [
      "daemon off;",
      // One process, so that stopping it leaves no worker behind.
      "master_process off;",
      `pid ${at("nginx.pid")};`,
      `error_log ${at("error.log")};`,
      "events { worker_connections 64; }",
      "http {",
      "  access_log off;",
      ...["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map(
        (kind) => `  ${kind}_temp_path ${at(kind)};`,
      ),
      `  proxy_cache_path ${at("cache")} keys_zone=ids:1m;`,
      "  server {",
      `    listen 127.0.0.1:${port};`,
      "    location / {",
      `      proxy_pass http://127.0.0.1:${backend};`,
      "      proxy_cache ids;",
      "      proxy_cache_valid 200 404 1m;",
      "      add_header x-cache $upstream_cache_status always;",
      "    }",
      "  }",
      "}",
      "",
    ].join("\n"),
  );
  const proxy = startProxy("nginx", ["-c", file, "-p", dir]);
  stops.push(proxy.stop);
  return proxy;
}

/** The paths that hand out ids, ranges or batches, on the server's default configuration. */
const ISSUING = [
  "/api/segment/get/leaf-segment-test",
  "/api/snowflake/get/x",
  "/api/v1/segment/leaf-segment-test/id",
  "/api/v1/segment/leaf-segment-test/ids?count=3",
  "/api/v1/segment/leaf-segment-test/range?count=5",
  "/api/v1/snowflake/id",
  "/api/v1/snowflake/ids?count=3",
];

describe("behind a caching proxy", () => {
  it("no answer that hands out ids is served twice from nginx's proxy_cache", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-server-cache-"));
    dirs.push(dir);
    const port = await freePort();
    const server = await startCli(mkdtempSync(join(dir, "node-")), {
      LEAF_SERVER_PORT: String(port),
    });
    stops.push(() => server.child.kill("SIGKILL"));
    const front = await freePort();
    const nginx = cachingNginx(mkdtempSync(join(dir, "nginx-")), front, port);
    await waitUntil("nginx answering", async () => {
      const res = await fetch(`http://127.0.0.1:${front}/health/live`).catch(() => null);
      return res?.status === 200;
    });
    for (const path of ISSUING) {
      const answers: Array<{ status: number; body: string; cache: string | null }> = [];
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`http://127.0.0.1:${front}${path}`);
        answers.push({
          status: res.status,
          body: await res.text(),
          cache: res.headers.get("x-cache"),
        });
      }
      const context = `${path}: ${JSON.stringify(answers)}\n${nginx.output()}`;
      expect(
        answers.map((a) => a.status),
        context,
      ).toEqual([200, 200]);
      expect(answers[1]!.body, context).not.toBe(answers[0]!.body);
      expect(
        answers.map((a) => a.cache),
        context,
      ).toEqual(["MISS", "MISS"]);
    }
  });

  it("marks every answer no-store: the fast path's, fastify's routes, errors and 404s", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-server-cache-"));
    dirs.push(dir);
    const port = await freePort();
    const server = await startCli(dir, { LEAF_SERVER_PORT: String(port) });
    stops.push(() => server.child.kill("SIGKILL"));
    const paths = [
      ...ISSUING,
      "/api/v1/segment/leaf-segment-test/ids?count=zero", // 400
      "/api/segment/get/no-such-tag", // Java Leaf's error text
      "/no/such/path", // 404
      "/health/ready",
      "/metrics",
    ];
    for (const path of paths) {
      const res = await fetch(`http://127.0.0.1:${port}${path}`);
      await res.arrayBuffer();
      expect(res.headers.get("cache-control"), `${path} (${res.status})`).toBe("no-store");
    }
  });
});
