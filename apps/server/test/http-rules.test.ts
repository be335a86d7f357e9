// The rules every route follows, tried over real sockets: Java Leaf's paths answer every method
// Spring's @RequestMapping answers, with any body; a wrong method is a 405 with Allow; an unknown
// query parameter is a 400 that names it and issues nothing; a request with huge headers gets a 431
// in the project's error shape; a token sent is never written back, in an answer or in the log.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort, stopAll } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listRoutes, openApiDocument } from "../src/index";
import { routeRules } from "../src/route-rules";
import { startCli } from "./cli-process";
import { get, startTestServer, type TestServer } from "./helpers";

const ADMIN = "admin-token-0123456789abcdef";
const GUARD_TOKEN = "guard-token-0123";
let test: TestServer;
let base: string;

beforeAll(async () => {
  test = await startTestServer({
    server: { adminToken: ADMIN, accessTokens: { guarded: GUARD_TOKEN } },
  });
  base = test.server.url;
});

afterAll(async () => {
  await test?.stop();
  await stopAll();
});

/** A raw HTTP/1.1 exchange on a new socket: what the server wrote back until it closed. */
function rawRequest(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      answer += chunk;
    });
    socket.on("error", (error) => (answer ? resolve(answer) : reject(error)));
    socket.on("close", () => resolve(answer));
    socket.write(request);
  });
}

function port(): number {
  return Number(new URL(base).port);
}

describe("Java Leaf's paths answer every method @RequestMapping answers, with any body", () => {
  const bodies: Array<[string, Record<string, string>, string | undefined]> = [
    ["no body", {}, undefined],
    ["an empty form (curl -d '')", { "content-type": "application/x-www-form-urlencoded" }, ""],
    ["a form (curl -d a=1)", { "content-type": "application/x-www-form-urlencoded" }, "a=1&b=2"],
    ["a bare word (curl -d x)", { "content-type": "application/x-www-form-urlencoded" }, "x"],
    ["JSON", { "content-type": "application/json" }, '{"key":"leaf-segment-test"}'],
    ["text", { "content-type": "text/plain" }, "hello"],
    ["bytes", { "content-type": "application/octet-stream" }, "\u0000\u0001"],
    ["a multipart form", { "content-type": "multipart/form-data; boundary=x" }, "--x--"],
  ];

  it("gives a new segment id to POST, PUT, PATCH and DELETE with each kind of body", async () => {
    const seen = new Set<bigint>();
    for (const method of ["GET", "POST", "PUT", "PATCH", "DELETE"]) {
      for (const [what, headers, body] of bodies) {
        const res = await fetch(`${base}/api/segment/get/leaf-segment-test`, {
          method,
          headers,
          body: method === "GET" ? undefined : body,
        });
        const text = await res.text();
        expect(res.status, `${method} with ${what}: ${text}`).toBe(200);
        expect(text, `${method} with ${what}`).toMatch(/^[0-9]+$/);
        seen.add(BigInt(text));
      }
    }
    expect(seen.size).toBe(5 * bodies.length);
  });

  it("answers the snowflake path and the decoder to POST, and batches with ?count", async () => {
    const snowflake = await fetch(`${base}/api/snowflake/get/any?count=3`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "z=1",
    });
    expect(snowflake.status).toBe(200);
    expect((await snowflake.text()).trim().split("\n")).toHaveLength(3);
    const decoded = await fetch(`${base}/decodeSnowflakeId?snowflakeId=1256557484213448722`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(decoded.status).toBe(200);
    expect(await decoded.json()).toMatchObject({ workerId: "619", sequenceId: "18" });
  });

  it("works with curl -d and curl -X POST, as Java Leaf's users call it", async () => {
    const curl = promisify(execFile);
    const url = `${base}/api/segment/get/leaf-segment-test`;
    for (const args of [
      ["-d", "a=b"],
      ["-d", ""],
      ["-X", "POST"],
      ["-X", "DELETE"],
    ]) {
      const { stdout } = await curl("curl", ["-sS", "--fail-with-body", ...args, url]);
      expect(stdout, args.join(" ")).toMatch(/^[0-9]+$/);
    }
  });

  it("still refuses a body past the limit with 413, in Java Leaf's plain-text error shape", async () => {
    const res = await fetch(`${base}/api/segment/get/leaf-segment-test`, {
      method: "POST",
      headers: { "content-type": "text/plain" },
      body: "x".repeat(70 * 1024),
    });
    expect(res.status).toBe(413);
    expect(await res.text()).toMatch(/^BAD_REQUEST: \[leaf\] \[server\] bad request: .*too large/);
  });

  it("takes no id for HEAD: 405 with the methods the path answers", async () => {
    const before = BigInt((await (await fetch(`${base}/api/snowflake/get/x`)).text()).trim());
    const segmentBefore = BigInt(
      (await (await fetch(`${base}/api/segment/get/leaf-segment-test`)).text()).trim(),
    );
    for (const path of ["/api/segment/get/leaf-segment-test", "/api/snowflake/get/x"]) {
      const head = await fetch(`${base}${path}`, { method: "HEAD" });
      expect(head.status).toBe(405);
      expect(head.headers.get("allow")).toBe("DELETE, GET, PATCH, POST, PUT");
    }
    const segmentAfter = BigInt(
      (await (await fetch(`${base}/api/segment/get/leaf-segment-test`)).text()).trim(),
    );
    expect(segmentAfter).toBe(segmentBefore + 1n);
    const after = BigInt((await (await fetch(`${base}/api/snowflake/get/x`)).text()).trim());
    expect(after > before).toBe(true);
  });
});

describe("a method a path does not answer", () => {
  it("is a 405 with Allow on every route, in the error shape, and a 404 where no path matches", async () => {
    const byPath = new Map<string, Set<string>>();
    for (const route of listRoutes(test.server.app)) {
      if (!byPath.has(route.url)) byPath.set(route.url, new Set());
      byPath.get(route.url)!.add(route.method);
    }
    let checked = 0;
    for (const [url, methods] of byPath) {
      const path = url.replace(/:[a-zA-Z]+/g, "some-value").replace("*", "some/thing");
      const wrong = ["GET", "POST", "PUT", "PATCH", "DELETE"].find((m) => !methods.has(m));
      if (wrong === undefined) continue;
      const res = await test.server.app.inject({ method: wrong as "GET", url: path });
      expect(res.statusCode, `${wrong} ${path}: ${res.body}`).toBe(405);
      const allow = String(res.headers.allow).split(", ");
      for (const method of methods) expect(allow, `${wrong} ${path}`).toContain(method);
      expect(res.json()).toMatchObject({
        status: 405,
        code: "METHOD_NOT_ALLOWED",
        message: expect.stringContaining(`${wrong} is not answered at ${path}`),
      });
      checked++;
    }
    expect(checked).toBeGreaterThan(15);

    const patch = await fetch(`${base}/api/v1/segment/leaf-segment-test/id`, { method: "POST" });
    expect(patch.status).toBe(405);
    expect(patch.headers.get("allow")).toBe("GET");
    const health = await fetch(`${base}/health/live`, { method: "DELETE" });
    expect(health.headers.get("allow")).toBe("GET, HEAD");
    const admin = await fetch(`${base}/api/v1/admin/tags/x`, { method: "GET" });
    expect(admin.status).toBe(405);
    expect(admin.headers.get("allow")).toBe("DELETE, PATCH");

    const none = await fetch(`${base}/api/nothing/here`, { method: "POST" });
    expect(none.status).toBe(404);
    expect(((await none.json()) as { code: string }).code).toBe("NOT_FOUND");
  });
});

describe("an unknown query parameter", () => {
  it("is a 400 naming it and the accepted ones on every route, and issues nothing", async () => {
    const rules = routeRules(test.server.app)!;
    let checked = 0;
    for (const [route, accepted] of rules.declaredQueries()) {
      if (accepted === "*" || route.startsWith("HEAD ")) continue;
      const [method, url] = route.split(" ") as [string, string];
      const path = url.replace(/:[a-zA-Z]+/g, "leaf-segment-test");
      const res = await test.server.app.inject({
        method: method as "GET",
        url: `${path}?cout=100`,
        headers: { authorization: `Bearer ${ADMIN}`, accept: "application/json" },
        ...(method === "POST" || method === "PATCH" ? { payload: {} } : {}),
      });
      expect(res.statusCode, `${route}: ${res.body}`).toBe(400);
      const body = res.json();
      expect(body.code, route).toBe("INVALID_ARGUMENT");
      expect(body.message, route).toContain('unknown query parameter "cout"');
      expect(body.details, route).toEqual({ unknown: ["cout"], accepted: [...accepted] });
      expect(body.message, route).toContain(
        accepted.length === 0 ? "takes no query parameters" : `takes ${accepted.join(", ")}`,
      );
      checked++;
    }
    expect(checked).toBeGreaterThan(20);
  });

  it("never silently gives one id on Java Leaf's path: ?cout=100 takes no id", async () => {
    const first = BigInt((await get(test.server, "/api/segment/get/leaf-segment-test")).body);
    const typo = await get(test.server, "/api/segment/get/leaf-segment-test?cout=100");
    expect(typo.statusCode).toBe(400);
    expect(typo.body).toContain('unknown query parameter "cout"');
    expect(typo.body).toContain("takes count, token");
    const next = BigInt((await get(test.server, "/api/segment/get/leaf-segment-test")).body);
    expect(next).toBe(first + 1n);
    // The accepted ones still work, and several unknown ones are all named.
    expect(
      (await get(test.server, "/api/segment/get/leaf-segment-test?count=2")).body.split("\n"),
    ).toHaveLength(3);
    const many = await get(test.server, "/api/v1/snowflake/ids?cnt=2&keys=a&count=2");
    expect(many.json().message).toContain('unknown query parameters "cnt", "keys"');
  });

  it("is the OpenAPI document's list: each route takes exactly the query parameters it documents", () => {
    const doc = openApiDocument("test") as {
      paths: Record<string, Record<string, { parameters?: Array<{ in: string; name: string }> }>>;
    };
    const rules = routeRules(test.server.app)!;
    let compared = 0;
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const url = path.replace(/\{(\w+)\}/g, ":$1");
        const documented = (operation.parameters ?? [])
          .filter((p) => p.in === "query")
          .map((p) => p.name)
          .sort();
        const declared = rules.declaredQueries().get(`${method.toUpperCase()} ${url}`);
        expect(declared, `${method} ${path}`).toBeDefined();
        expect([...(declared as string[])].sort(), `${method} ${path}`).toEqual(documented);
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(25);
  });
});

describe("request headers too large", () => {
  it("get a 431 in the project's error shape over a real socket", async () => {
    const answer = await rawRequest(
      port(),
      `GET /api/segment/get/leaf-segment-test HTTP/1.1\r\nHost: x\r\nX-Huge: ${"h".repeat(40_000)}\r\n\r\n`,
    );
    const [head, body] = answer.split("\r\n\r\n");
    expect(head).toMatch(/^HTTP\/1\.1 431 Request Header Fields Too Large/);
    expect(head?.toLowerCase()).toContain("content-type: application/json");
    expect(JSON.parse(body!)).toMatchObject({
      status: 431,
      code: "BAD_REQUEST",
      message: expect.stringMatching(/^\[leaf\] \[server\] request header fields too large/),
    });
    // Malformed HTTP is answered the same way, and the server keeps serving.
    const bad = await rawRequest(port(), "NOT HTTP AT ALL\r\n\r\n");
    expect(bad).toMatch(/^HTTP\/1\.1 400 Bad Request/);
    expect(JSON.parse(bad.split("\r\n\r\n")[1]!)).toMatchObject({
      status: 400,
      code: "BAD_REQUEST",
    });
    expect((await fetch(`${base}/health/live`)).status).toBe(200);
  });
});

describe("a token sent is never written back", () => {
  const WRONG = "wrong-token-value-7f3a9c";

  it("in any answer: wrong, repeated or misplaced tokens are refused without the value", async () => {
    const answers = [
      await get(test.server, `/api/segment/get/guarded?token=${WRONG}`),
      await get(test.server, `/api/segment/get/guarded?token=${WRONG}`, {
        accept: "application/json",
      }),
      await get(test.server, "/api/segment/get/guarded", { authorization: `Bearer ${WRONG}` }),
      await get(test.server, "/api/v1/segment/guarded/id", { "x-leaf-token": WRONG }),
      await get(test.server, `/api/segment/get/guarded?token=${WRONG}&token=${WRONG}2`),
      await get(test.server, `/api/v1/decode/1?token=${WRONG}`),
      await get(test.server, `/health/ready?token=${WRONG}`),
      await get(test.server, "/api/v1/admin/tags", { authorization: `Bearer ${WRONG}` }),
      await get(test.server, "/api/v1/admin/tags", { authorization: WRONG }),
    ];
    const statuses = answers.map((res) => res.statusCode);
    expect(statuses).toEqual([403, 403, 403, 403, 400, 400, 400, 403, 401]);
    for (const res of answers) {
      expect(res.body).not.toContain(WRONG);
      expect(JSON.stringify(res.headers)).not.toContain(WRONG);
    }
  });

  it("in the log: request logs show token=(hidden)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-token-log-"));
    const serverPort = await freePort();
    const cli = await startCli(dir, {
      LEAF_SERVER_PORT: String(serverPort),
      LEAF_SERVER_REQUEST_LOG: "true",
      LEAF_SERVER_ACCESS_TOKENS: JSON.stringify({ guarded: GUARD_TOKEN }),
      LEAF_SERVER_ADMIN_TOKEN: ADMIN,
      LEAF_SNOWFLAKE_ENABLED: "false",
      LEAF_DATA_DIR: join(dir, "data"),
    });
    try {
      const url = `http://127.0.0.1:${serverPort}`;
      expect((await fetch(`${url}/api/segment/get/guarded?token=${WRONG}`)).status).toBe(403);
      expect((await fetch(`${url}/api/segment/get/guarded?count=2&%74oken=${WRONG}`)).status).toBe(
        403,
      );
      expect(
        (await fetch(`${url}/api/v1/admin/tags`, { headers: { authorization: `Bearer ${WRONG}` } }))
          .status,
      ).toBe(403);
      // The request log is written as the answers go out: wait for the three lines.
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline && (cli.output().match(/request completed/g) ?? []).length < 3) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const log = cli.output() + cli.errors();
      expect(log).toContain("/api/segment/get/guarded?token=(hidden)");
      expect(log).toContain("/api/segment/get/guarded?count=2&token=(hidden)");
      expect(log).not.toContain(WRONG);
    } finally {
      cli.child.kill("SIGTERM");
      await cli.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
