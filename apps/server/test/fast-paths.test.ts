// The fast path of the single-id Java paths (src/fast-paths.ts): which requests it answers itself,
// and that what a client and an operator see is the fastify route's, whichever of the two answered.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FastPath, fastIdPaths } from "../src/fast-paths";
import { IdSources } from "../src/id-sources";
import { startTestServer, type TestServer } from "./helpers";

const TAG = "leaf-segment-test";
let test: TestServer;

beforeAll(async () => {
  test = await startTestServer();
});

afterAll(async () => {
  await test?.stop();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function request(
  port: number,
  path: string,
  options: { method?: string; body?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port, path, method: options.method ?? "GET", headers: options.headers },
      (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** A server that answers with the fast path alone: 599 "declined" where it leaves a request to fastify. */
async function fastPathOnly(fast: FastPath): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (fast(req, res)) return;
    req.resume();
    res.writeHead(599).end("declined");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function scrape(): Promise<string> {
  return (await request(test.server.port, "/metrics")).body;
}

function sample(text: string, name: string, labels: string): number {
  const prefix = `${name}{${labels}} `;
  const line = text.split("\n").find((l) => l.startsWith(prefix));
  return line === undefined ? 0 : Number(line.slice(prefix.length));
}

describe("the single-id Java paths' fast path", () => {
  it("answers a plain GET itself and leaves every other request to fastify, taking no id then", async () => {
    const fast = fastIdPaths(test.server.context, new IdSources(test.server.context))!;
    const only = await fastPathOnly(fast);
    try {
      // The tag's first range loads on its first request (segment.load lazy): through fastify.
      expect((await request(only.port, `/api/segment/get/${TAG}`)).status).toBe(599);
      expect((await request(test.server.port, `/api/segment/get/${TAG}`)).status).toBe(200);
      const first = await request(only.port, `/api/segment/get/${TAG}`);
      expect(first.status).toBe(200);
      expect(await request(only.port, "/api/snowflake/get/any-key")).toMatchObject({ status: 200 });
      const declined = [
        `/api/segment/get/${TAG}?count=2`,
        `/api/segment/get/${TAG}?`,
        "/api/segment/get/leaf%2Dsegment%2Dtest",
        `/api/segment/get/${TAG}/`,
        "/api/segment/get/no-such-tag",
        `/api/segment/get/${"t".repeat(129)}`,
        "/api/v1/segment/leaf-segment-test",
        "/api/snowflake/get/a%20key",
      ];
      for (const path of declined) {
        expect((await request(only.port, path)).status, path).toBe(599);
      }
      expect(
        (await request(only.port, `/api/segment/get/${TAG}`, { method: "POST", body: "x=1" }))
          .status,
      ).toBe(599);
      expect((await request(only.port, `/api/segment/get/${TAG}`, { method: "HEAD" })).status).toBe(
        599,
      );
      // Nothing declined took an id: the next one follows the first.
      const next = await request(only.port, `/api/segment/get/${TAG}`);
      expect(BigInt(next.body)).toBe(BigInt(first.body) + 1n);
    } finally {
      await only.close();
    }
  });

  it("gives the fastify route's answer and counts it the same way", async () => {
    const { port } = test.server;
    const route = 'method="GET",route="/api/segment/get/:key",status_code="200"';
    const before = await scrape();
    // Alternately the fast path (plain GET) and the fastify route (an empty query string, and
    // fastify.inject, which never meets the fast path).
    const bodies: bigint[] = [];
    for (let i = 0; i < 5; i++) {
      const plain = await request(port, `/api/segment/get/${TAG}`);
      const routed = await request(port, `/api/segment/get/${TAG}?`);
      const injected = await test.server.app.inject(`/api/segment/get/${TAG}`);
      for (const answer of [plain, routed, { ...injected, status: injected.statusCode }]) {
        expect(answer.status).toBe(200);
        expect(answer.headers["content-type"]).toBe("text/plain; charset=utf-8");
        expect(answer.headers["content-length"]).toBe(String(answer.body.length));
        expect(answer.body).toMatch(/^\d+$/);
      }
      expect(plain.headers.connection).toBe(routed.headers.connection);
      bodies.push(BigInt(plain.body), BigInt(routed.body), BigInt(injected.body));
    }
    for (let i = 1; i < bodies.length; i++) expect(bodies[i]).toBe(bodies[i - 1]! + 1n);
    const after = await scrape();
    for (const name of ["http_requests_total", "http_request_duration_seconds_count"]) {
      expect(sample(after, name, route) - sample(before, name, route)).toBe(15);
    }
    const issued = `mode="segment",tag="${TAG}"`;
    expect(
      sample(after, "leaf_ids_issued_total", issued) -
        sample(before, "leaf_ids_issued_total", issued),
    ).toBe(15);
    // The monitor's activity counts the tag's requests, whichever answered them.
    const requests = test.server.context.metrics.activity.requestCount("segment", TAG);
    const counted = requests.n;
    for (let i = 0; i < 4; i++) await request(port, `/api/segment/get/${TAG}`);
    await request(port, `/api/segment/get/${TAG}?`);
    expect(requests.n - counted).toBe(5);
  });

  it("leaves errors to fastify: an unknown tag is Java Leaf's text, counted once", async () => {
    const { port } = test.server;
    const labels = 'mode="segment",code="UNKNOWN_TAG"';
    const before = sample(await scrape(), "leaf_request_errors_total", labels);
    const answer = await request(port, "/api/segment/get/no-such-tag");
    expect(answer.status).toBe(404);
    expect(answer.body).toMatch(/^Result\{id=-2, status=EXCEPTION\}\nUNKNOWN_TAG: /);
    expect(sample(await scrape(), "leaf_request_errors_total", labels)).toBe(before + 1);
  });

  it("is off where every request needs fastify: access tokens, the request log", async () => {
    const guarded = await startTestServer({
      server: { accessTokens: { [TAG]: "secret-token-1" } },
    });
    const logged = await startTestServer({ server: { requestLog: true } });
    try {
      expect(fastIdPaths(guarded.server.context, new IdSources(guarded.server.context))).toBe(
        undefined,
      );
      expect(fastIdPaths(logged.server.context, new IdSources(logged.server.context))).toBe(
        undefined,
      );
      const refused = await request(guarded.server.port, `/api/segment/get/${TAG}`);
      expect(refused.status).toBe(401);
      const allowed = await request(guarded.server.port, `/api/segment/get/${TAG}`, {
        headers: { authorization: "Bearer secret-token-1" },
      });
      expect(allowed.status).toBe(200);
    } finally {
      await guarded.stop();
      await logged.stop();
    }
  });

  it("leaves a draining server's answers to fastify, which asks the client to close", async () => {
    const draining = await startTestServer();
    try {
      const stopped = draining.server.close({ drainMs: 1500 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const answer = await request(draining.server.port, `/api/segment/get/${TAG}`);
      expect(answer.status).toBe(200);
      expect(answer.headers.connection).toBe("close");
      await stopped;
    } finally {
      await draining.stop();
    }
  });
});
