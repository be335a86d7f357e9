// SIGTERM under keep-alive load, as a load balancer sees it: readiness turns false first, every
// request sent is answered (none reset, none refused), and connections are closed by the server
// with `Connection: close` before the port goes away.
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, stopAll } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { startCli } from "./cli-process";
import { startTestServer } from "./helpers";

const dirs: string[] = [];
afterAll(async () => {
  await stopAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  body: string;
  connectionClose: boolean;
}

function get(agent: http.Agent, port: number, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: "127.0.0.1", port, path, agent }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          body,
          connectionClose: res.headers.connection === "close",
        }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
  });
}

/**
 * Keep-alive load on `connections` sockets with a load balancer in front: it polls readiness and
 * stops sending once it reads 503; a connection also stops once the server asks it to close.
 */
async function loadUntilRemoved(port: number, connections: number, onStarted: () => void) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const results = { ok: 0, failed: [] as string[], closeAnswers: 0, afterNotReady: "" };
  let removed = false;
  const balancer = (async () => {
    const probe = new http.Agent({ keepAlive: false });
    const deadline = Date.now() + 20_000;
    while (results.afterNotReady === "" && Date.now() < deadline) {
      const ready = await get(probe, port, "/health/ready").catch(() => undefined);
      if (ready && ready.status === 503) {
        removed = true;
        // Not ready, yet still answering: a request on a new connection gets an id.
        const late = await get(probe, port, "/api/snowflake/get/x").catch((e: Error) => e);
        results.afterNotReady =
          late instanceof Error
            ? late.message
            : `${late.status} ${/^[0-9]+$/.test(late.body) ? "id" : late.body} close=${late.connectionClose}`;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const worker = async () => {
    for (;;) {
      if (removed) return;
      try {
        const answer = await get(agent, port, "/api/snowflake/get/x");
        if (answer.status === 200 && /^[0-9]+$/.test(answer.body)) {
          results.ok++;
        } else results.failed.push(`${answer.status} ${answer.body.slice(0, 120)}`);
        if (answer.connectionClose) {
          results.closeAnswers++;
          return;
        }
      } catch (error) {
        results.failed.push(String((error as Error).message));
        return;
      }
    }
  };
  const workers = Array.from({ length: connections }, worker);
  onStarted();
  await Promise.all(workers);
  await balancer;
  agent.destroy();
  return results;
}

describe("stopping under keep-alive load", () => {
  it("turns readiness false, keeps answering with Connection: close through the drain, and loses no request", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "leaf-server-drain-"));
    dirs.push(cwd);
    const port = await freePort();
    const server = await startCli(cwd, {
      LEAF_SERVER_PORT: String(port),
      LEAF_SERVER_DRAIN_MS: "1500",
    });
    const results = await loadUntilRemoved(port, 16, () => {
      setTimeout(() => server.child.kill("SIGTERM"), 500);
    });
    expect(await server.exited).toBe(0);
    expect(results.failed).toEqual([]);
    expect(results.ok).toBeGreaterThan(0);
    // The balancer saw "not ready" while the server still answered: the drain was visible.
    expect(results.afterNotReady).toBe("200 id close=true");
    // Connections were asked to close by the server (Connection: close), none was reset.
    expect(results.closeAnswers).toBeGreaterThan(0);
  });
});

describe("a request that reaches the server while its modes close", () => {
  it("is answered 503 SHUTTING_DOWN with Retry-After, in Java Leaf's text on its paths", async () => {
    const test = await startTestServer();
    try {
      // Set as the stop sets it once every connection is closed (no client can reach this state
      // through the network: fastify's inject can).
      test.server.context.modesClosing = true;
      const java = await test.server.app.inject("/api/segment/get/leaf-segment-test");
      expect(java.statusCode).toBe(503);
      expect(java.headers["retry-after"]).toBe("1");
      expect(java.headers["content-type"]).toMatch(/^text\/plain/);
      expect(java.body).toMatch(/^SHUTTING_DOWN: \[leaf\] \[server\] the server is shutting down/);
      const json = await test.server.app.inject("/api/v1/snowflake/id");
      expect(json.statusCode).toBe(503);
      expect(json.headers["retry-after"]).toBe("1");
      expect(json.json()).toMatchObject({ status: 503, code: "SHUTTING_DOWN" });
    } finally {
      test.server.context.modesClosing = false;
      await test.stop();
    }
  });
});
