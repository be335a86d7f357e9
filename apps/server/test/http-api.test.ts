import { LeafError, layouts } from "@leaf/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  buildApp,
  type LeafServer,
  listRoutes,
  loadConfig,
  openApiDocument,
  ServerMetrics,
  VERSION,
} from "../src/index";
import { get, startTestServer, type TestServer } from "./helpers";

const ADMIN = "admin-token-0123456789abcdef";
const SECRET_TOKEN = "token-of-the-secret-tag";

let main: TestServer;
let server: LeafServer;
/** Snowflake disabled, no admin token, a custom epoch. */
let other: TestServer;
const OTHER_EPOCH = Date.UTC(2020, 0, 1);

beforeAll(async () => {
  main = await startTestServer({
    server: { adminToken: ADMIN, maxBatch: 1000, accessTokens: { "secret-tag": SECRET_TOKEN } },
  });
  server = main.server;
  other = await startTestServer({
    snowflake: { enabled: false },
    segment: { demoTag: "other-tag" },
  });
});

afterAll(async () => {
  await main?.stop();
  await other?.stop();
});

const DECIMAL = /^[0-9]{1,19}$/;

describe("Java Leaf's paths", () => {
  it("answers a segment id as a plain-text decimal, one more each time", async () => {
    const first = await get(server, "/api/segment/get/leaf-segment-test");
    const second = await get(server, "/api/segment/get/leaf-segment-test");
    expect(first.statusCode).toBe(200);
    expect(first.headers["content-type"]).toMatch(/^text\/plain/);
    expect(first.body).toMatch(DECIMAL);
    expect(BigInt(second.body)).toBe(BigInt(first.body) + 1n);
  });

  it("answers a batch with ?count=N, one id per line, or a JSON array of strings when asked", async () => {
    const text = await get(server, "/api/segment/get/leaf-segment-test?count=5");
    expect(text.statusCode).toBe(200);
    const ids = text.body.trimEnd().split("\n");
    expect(ids).toHaveLength(5);
    for (let i = 1; i < ids.length; i++) expect(BigInt(ids[i]!)).toBe(BigInt(ids[i - 1]!) + 1n);
    const json = await get(server, "/api/snowflake/get/any?count=3", {
      accept: "application/json",
    });
    expect(json.headers["content-type"]).toMatch(/^application\/json/);
    const body = json.json();
    expect(body.count).toBe(3);
    expect(body.ids).toHaveLength(3);
    for (const id of body.ids) expect(id).toMatch(DECIMAL);
    expect(json.body).not.toMatch(/[^"0-9]\d{16,}/); // no id as a bare JSON number
  });

  it("answers a snowflake id that decodes to this server's worker id and the current time", async () => {
    const before = Date.now();
    const res = await get(server, "/api/snowflake/get/anything");
    expect(res.statusCode).toBe(200);
    expect(res.body).toMatch(DECIMAL);
    const parts = layouts.leaf.decompose(res.body);
    expect(parts.workerId).toBe(0);
    expect(parts.timestampMs).toBeGreaterThanOrEqual(before - 1);
    expect(parts.timestampMs).toBeLessThanOrEqual(Date.now());
  });

  it("answers 404 with Leaf's code -2 for an unknown tag", async () => {
    const res = await get(server, "/api/segment/get/no-such-tag");
    expect(res.statusCode).toBe(404);
    expect(res.headers["content-type"]).toMatch(/^text\/plain/);
    expect(res.body).toMatch(/^Result\{id=-2, status=EXCEPTION\}\nUNKNOWN_TAG: .*no-such-tag/);
    const json = await get(server, "/api/segment/get/no-such-tag", { accept: "application/json" });
    expect(json.json()).toMatchObject({ status: 404, code: "UNKNOWN_TAG", leafCode: -2 });
  });

  it("answers 400 for a count that is not a number, is 0, or passes the cap", async () => {
    for (const [count, expected] of [
      ["abc", 'invalid count: "abc"'],
      ["0", 'invalid count: "0"'],
      ["1001", "from 1 to 1,000 (server.maxBatch)"],
      ["1e3", 'invalid count: "1e3"'],
    ] as const) {
      const res = await get(server, `/api/snowflake/get/k?count=${count}`);
      expect(res.statusCode, count).toBe(400);
      expect(res.body, count).toContain(expected);
    }
    const twice = await get(server, "/api/segment/get/leaf-segment-test?count=1&count=2");
    expect(twice.statusCode).toBe(400);
    expect(twice.body).toContain("given once");
  });

  it("answers 400 for a key longer than 128 characters", async () => {
    const res = await get(server, `/api/segment/get/${"k".repeat(129)}`);
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain("invalid key");
  });

  it("decodes Leaf's test vector with Java Leaf's answer shape", async () => {
    const res = await get(server, "/decodeSnowflakeId?snowflakeId=1256557484213448722");
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body)).toEqual(["timestamp", "workerId", "sequenceId"]);
    expect(body.timestamp).toMatch(/^1588421624602\(2020-05-0[23] \d\d:\d3:44\.602\)$/);
    expect(body.workerId).toBe("619");
    expect(body.sequenceId).toBe("18");
  });

  it("decodes with the configured epoch, not Java Leaf's hard-coded one", async () => {
    const custom = await startTestServer({
      snowflake: { epoch: OTHER_EPOCH },
      segment: { enabled: false },
    });
    try {
      const id = (await get(custom.server, "/api/snowflake/get/x")).body;
      const decoded = (await get(custom.server, `/decodeSnowflakeId?snowflakeId=${id}`)).json();
      const ms = Number(decoded.timestamp.split("(")[0]);
      expect(Math.abs(ms - Date.now())).toBeLessThan(60_000);
      expect(ms - Number((id.length > 0 ? BigInt(id) >> 22n : 0n) + BigInt(OTHER_EPOCH))).toBe(0);
    } finally {
      await custom.stop();
    }
  });

  it("answers 400 for an id that is not a decimal 63-bit integer, with Java Leaf's errorMsg field", async () => {
    for (const bad of ["abc", "-1", "9223372036854775808", "", "1.5"]) {
      const res = await get(server, `/decodeSnowflakeId?snowflakeId=${encodeURIComponent(bad)}`);
      expect(res.statusCode, bad).toBe(400);
      expect(res.json().errorMsg, bad).toMatch(/invalid id/);
    }
    const missing = await get(server, "/decodeSnowflakeId");
    expect(missing.statusCode).toBe(400);
    expect(missing.json().message).toContain("snowflakeId");
  });

  it("answers an error for a disabled mode, never the id 0", async () => {
    const res = await get(other.server, "/api/snowflake/get/test");
    expect(res.statusCode).toBe(404);
    expect(res.body).not.toBe("0");
    expect(res.body).toContain("MODE_DISABLED");
    expect(res.body).toContain("snowflake.enabled (leaf.snowflake.enable)");
    const json = await get(other.server, "/api/v1/snowflake/ids?count=2");
    expect(json.json()).toMatchObject({ status: 404, code: "MODE_DISABLED" });
  });

  it("answers 503 with Leaf's code -1 while the server is still starting", async () => {
    const config = loadConfig({ values: { server: { port: 0 } }, env: {} });
    const app = buildApp(
      {
        config,
        metrics: new ServerMetrics(),
        services: undefined,
        state: "starting",
        startedAt: Date.now(),
        version: VERSION,
      },
      { logger: false },
    );
    try {
      const segment = await app.inject("/api/segment/get/leaf-segment-test");
      expect(segment.statusCode).toBe(503);
      expect(segment.headers["retry-after"]).toBe("1");
      expect(segment.body).toMatch(
        /^Result\{id=-1, status=EXCEPTION\}\nNOT_INITIALIZED: .*still starting/,
      );
      const ready = await app.inject("/health/ready");
      expect(ready.statusCode).toBe(503);
      expect(ready.json()).toMatchObject({
        ready: false,
        checks: { segment: { ready: false, detail: "starting" } },
      });
      expect((await app.inject("/health/live")).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });

  it("answers 503 with the fork's code -4 once the lease is lost, and readiness turns false", async () => {
    const lost = await startTestServer({ segment: { enabled: false } });
    try {
      lost.server.services.snowflake!.worker.generator.fence(
        new LeafError({
          component: "test",
          code: "LEASE_LOST",
          leafCode: -4,
          message: "worker id 0 lease lost: session expired",
        }),
      );
      const res = await get(lost.server, "/api/snowflake/get/x");
      expect(res.statusCode).toBe(503);
      expect(res.body).toMatch(/^Result\{id=-4, status=EXCEPTION\}\nLEASE_LOST: /);
      const ready = await get(lost.server, "/health/ready");
      expect(ready.statusCode).toBe(503);
      expect(ready.json().checks.snowflake.detail).toContain("lease lost");
    } finally {
      await lost.stop();
    }
  });
});

describe("the JSON API", () => {
  it("gives segment ids as strings, one or a batch", async () => {
    const one = await get(server, "/api/v1/segment/leaf-segment-test/id");
    expect(one.statusCode).toBe(200);
    expect(one.json()).toEqual({ tag: "leaf-segment-test", id: expect.stringMatching(DECIMAL) });
    const many = (await get(server, "/api/v1/segment/leaf-segment-test/ids?count=4")).json();
    expect(many.count).toBe(4);
    expect(BigInt(many.ids[0])).toBe(BigInt(one.json().id) + 1n);
    expect(many.ids.every((id: unknown) => typeof id === "string")).toBe(true);
  });

  it("gives snowflake ids as strings, in increasing order", async () => {
    const one = (await get(server, "/api/v1/snowflake/id")).json();
    expect(one.id).toMatch(DECIMAL);
    const many = (await get(server, "/api/v1/snowflake/ids?count=1000")).json();
    expect(many.ids).toHaveLength(1000);
    for (let i = 1; i < many.ids.length; i++)
      expect(BigInt(many.ids[i]) > BigInt(many.ids[i - 1])).toBe(true);
    expect(BigInt(many.ids[0]) > BigInt(one.id)).toBe(true);
  });

  it("answers 404 MODE_DISABLED for the redis sequence when it is not configured", async () => {
    const res = await get(server, "/api/v1/redis-sequence/id?shard=1");
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: "MODE_DISABLED" });
  });

  it("decodes an id with every layout", async () => {
    const id = "1256557484213448722";
    const snowflake = (await get(server, `/api/v1/decode/${id}`)).json();
    expect(snowflake).toMatchObject({
      id,
      layout: "leaf",
      timestampMs: 1588421624602,
      workerId: 619,
      sequence: 18,
    });
    expect(snowflake.time).toBe("2020-05-02T12:13:44.602Z");
    for (const layout of ["leaf", "sonyflake", "baidu", "redis-sequence"]) {
      const res = await get(server, `/api/v1/decode/${id}?layout=${layout}`);
      expect(res.statusCode, layout).toBe(200);
      expect(res.json(), layout).toMatchObject({
        id,
        layout: layout === "redis-sequence" ? "redis-sequence" : layout,
      });
    }
    const redis = (
      await get(server, "/api/v1/decode/order-20240102030405000017" + "0003?layout=redis-sequence")
    ).json();
    expect(redis).toMatchObject({
      shard: 3,
      sequence: 17,
      time: "2024-01-02T03:04:05.000Z",
      stringForm: "order-202401020304050000170003",
    });
  });

  it("reads a redis-sequence string id in the time zone it was made in", async () => {
    const id = "202401020304050000170003";
    const utc = (await get(server, `/api/v1/decode/${id}?layout=redis-sequence`)).json();
    expect(utc).toMatchObject({ time: "2024-01-02T03:04:05.000Z", timeZone: "UTC" });
    const east = (
      await get(server, `/api/v1/decode/${id}?layout=redis-sequence&timeZone=%2B08:00`)
    ).json();
    expect(east).toMatchObject({ time: "2024-01-01T19:04:05.000Z", timeZone: "+08:00", shard: 3 });
    const bad = await get(server, `/api/v1/decode/${id}?layout=redis-sequence&timeZone=Mars/Base`);
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toContain("timeZone");
    const notRedis = await get(server, "/api/v1/decode/1?timeZone=UTC");
    expect(notRedis.statusCode).toBe(400);
    expect(notRedis.json().message).toContain("layout=redis-sequence only");
  });

  it("answers 400 for an unknown layout or a bad id", async () => {
    const layout = await get(server, "/api/v1/decode/123?layout=twitter");
    expect(layout.statusCode).toBe(400);
    expect(layout.json().message).toContain("invalid layout");
    const id = await get(server, "/api/v1/decode/12a");
    expect(id.statusCode).toBe(400);
    expect(id.json()).toMatchObject({ code: "INVALID_ID" });
  });

  it("lists the layouts it decodes", async () => {
    const body = (await get(server, "/api/v1/layouts")).json();
    expect(body.layouts.map((l: { name: string }) => l.name)).toEqual([
      "snowflake",
      "leaf",
      "sonyflake",
      "baidu",
      "safe53ms",
      "safe53s",
      "redis-sequence",
    ]);
    expect(body.layouts[0]).toMatchObject({
      epoch: 1288834974657,
      bits: { timestamp: 41, worker: 10, sequence: 12 },
    });
  });

  it("describes every route in its OpenAPI document, and nothing that is not a route", async () => {
    const doc = (await get(server, "/openapi.json")).json();
    expect(doc.openapi).toBe("3.1.0");
    const documented = new Set<string>();
    for (const [path, ops] of Object.entries(doc.paths as Record<string, object>)) {
      for (const method of Object.keys(ops))
        documented.add(`${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ":$1")}`);
    }
    const undocumented = new Set(["GET /", "GET /cache", "GET /db"]);
    const registered = new Set(
      listRoutes(server.app)
        .map((r) => `${r.method} ${r.url}`)
        .filter((r) => !undocumented.has(r)),
    );
    expect([...registered].sort()).toEqual([...documented].sort());
    expect(openApiDocument("x").info.version).toBe("x");
  });
});

describe("the admin API", () => {
  it("is off without an admin token, and says how to turn it on", async () => {
    const res = await get(other.server, "/api/v1/admin/tags");
    expect(res.statusCode).toBe(404);
    expect(res.json().message).toContain("server.adminToken");
  });

  it("refuses a request without the token (401) or with a wrong one (403)", async () => {
    const none = await get(server, "/api/v1/admin/tags");
    expect(none.statusCode).toBe(401);
    expect(none.headers["www-authenticate"]).toContain("Bearer");
    const wrong = await get(server, "/api/v1/admin/tags", {
      authorization: "Bearer wrong-token-wrong-token",
    });
    expect(wrong.statusCode).toBe(403);
  });

  it("creates a tag that serves ids at once, changes its step and lists it", async () => {
    const auth = { authorization: `Bearer ${ADMIN}` };
    const created = await server.app.inject({
      method: "POST",
      url: "/api/v1/admin/tags",
      headers: auth,
      payload: {
        tag: "orders",
        step: 100,
        startId: "5000000000000000000",
        description: "order ids",
      },
    });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({
      tag: "orders",
      maxId: "5000000000000000000",
      step: 100,
    });
    const id = await get(server, "/api/segment/get/orders");
    expect(id.body).toBe("5000000000000000000");
    const again = await server.app.inject({
      method: "POST",
      url: "/api/v1/admin/tags",
      headers: auth,
      payload: { tag: "orders", step: 5 },
    });
    expect(again.statusCode).toBe(409);
    expect(again.json().code).toBe("ALREADY_EXISTS");
    const patched = await server.app.inject({
      method: "PATCH",
      url: "/api/v1/admin/tags/orders",
      headers: auth,
      payload: { step: 250 },
    });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ tag: "orders", step: 250 });
    const list = (await get(server, "/api/v1/admin/tags", auth)).json();
    expect(list.store).toBe("embedded");
    const orders = list.tags.find((t: { tag: string }) => t.tag === "orders");
    expect(orders).toMatchObject({
      step: 250,
      served: true,
      maxId: "5000000000000000100",
      description: "order ids",
    });
  });

  it("answers 400 naming the field for a bad body, and 404 for an unknown tag", async () => {
    const auth = { authorization: `Bearer ${ADMIN}` };
    const post = (payload: unknown) =>
      server.app.inject({
        method: "POST",
        url: "/api/v1/admin/tags",
        headers: auth,
        payload: payload as object,
      });
    expect((await post({ tag: "x", step: 0 })).json().message).toContain("invalid step: 0");
    expect((await post({ tag: "x", step: "10" })).json().message).toContain('invalid step: "10"');
    expect((await post({ tag: "", step: 10 })).json().message).toContain("invalid tag");
    expect((await post({ tag: "x", step: 10, colour: "red" })).json().message).toContain(
      "invalid colour",
    );
    expect((await post({ tag: "x", step: 10, startId: "-3" })).json().message).toContain(
      "invalid startId",
    );
    expect((await post([1, 2])).statusCode).toBe(400);
    const text = await server.app.inject({
      method: "POST",
      url: "/api/v1/admin/tags",
      headers: { ...auth, "content-type": "application/json" },
      payload: "{not json",
    });
    expect(text.statusCode).toBe(400);
    const unknown = await server.app.inject({
      method: "PATCH",
      url: "/api/v1/admin/tags/nope",
      headers: auth,
      payload: { step: 5 },
    });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().leafCode).toBe(-2);
  });
});

describe("access tokens", () => {
  beforeAll(async () => {
    await server.app.inject({
      method: "POST",
      url: "/api/v1/admin/tags",
      headers: { authorization: `Bearer ${ADMIN}` },
      payload: { tag: "secret-tag", step: 10 },
    });
  });

  it("asks for the token of a tag that has one (401), refuses a wrong one (403), takes it from the query or a header", async () => {
    const none = await get(server, "/api/segment/get/secret-tag");
    expect(none.statusCode).toBe(401);
    expect(none.body).toContain("needs an access token");
    const wrong = await get(server, "/api/segment/get/secret-tag?token=not-the-token");
    expect(wrong.statusCode).toBe(403);
    expect(
      (await get(server, `/api/segment/get/secret-tag?token=${SECRET_TOKEN}`)).statusCode,
    ).toBe(200);
    expect(
      (
        await get(server, "/api/v1/segment/secret-tag/id", {
          authorization: `Bearer ${SECRET_TOKEN}`,
        })
      ).statusCode,
    ).toBe(200);
    expect(
      (
        await get(server, "/api/v1/segment/secret-tag/ids?count=2", {
          "x-leaf-token": SECRET_TOKEN,
        })
      ).statusCode,
    ).toBe(200);
  });

  it("leaves tags without tokens open", async () => {
    expect((await get(server, "/api/segment/get/leaf-segment-test")).statusCode).toBe(200);
  });
});

describe("health, metrics and the monitor", () => {
  it("answers liveness, and readiness per mode", async () => {
    expect((await get(server, "/health/live")).json()).toMatchObject({
      status: "up",
      state: "running",
    });
    const ready = await get(server, "/health/ready");
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toMatchObject({
      ready: true,
      checks: {
        segment: { ready: true },
        snowflake: { ready: true, detail: expect.stringContaining("worker id 0 held") },
      },
    });
    const one = (await get(server, "/health/ready?mode=snowflake")).json();
    expect(Object.keys(one.checks)).toEqual(["snowflake"]);
    expect((await get(server, "/health/ready?mode=bogus")).statusCode).toBe(400);
    expect((await get(other.server, "/health/ready?mode=snowflake")).json().message).toContain(
      "an enabled mode: segment",
    );
  });

  it("exposes Prometheus metrics: ids per mode and tag, loads, buffers, lease state", async () => {
    await get(server, "/api/segment/get/leaf-segment-test?count=7");
    const text = (await get(server, "/metrics")).body;
    const issued = /leaf_ids_issued_total\{mode="segment",tag="leaf-segment-test"\} (\d+)/.exec(
      text,
    );
    expect(Number(issued?.[1])).toBeGreaterThanOrEqual(7);
    expect(text).toMatch(/leaf_ids_issued_total\{mode="snowflake",tag=""\} [1-9]/);
    expect(text).toMatch(/leaf_segment_loads_total\{tag="leaf-segment-test",result="ok"\} [1-9]/);
    expect(text).toMatch(
      /leaf_segment_load_duration_seconds_count\{tag="leaf-segment-test"\} [1-9]/,
    );
    expect(text).toMatch(/leaf_segment_ids_left\{tag="leaf-segment-test"\} [1-9]/);
    expect(text).toContain('leaf_snowflake_lease_state{state="held"} 1');
    expect(text).toContain("leaf_snowflake_worker_id 0");
    expect(text).toContain("leaf_snowflake_clock_rollbacks_total");
    expect(text).toContain("leaf_store_errors_total");
    expect(text).toMatch(/leaf_request_errors_total\{mode="segment",code="UNKNOWN_TAG"\} [1-9]/);
  });

  it("serves the monitor page and its data, and sends Java Leaf's /cache and /db there", async () => {
    const page = await get(server, "/monitor");
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toMatch(/^text\/html/);
    const data = (await get(server, "/api/v1/monitor")).json();
    expect(data.server).toMatchObject({ name: "leaf", version: VERSION, state: "running" });
    const tag = data.segment.tags.find((t: { tag: string }) => t.tag === "leaf-segment-test");
    expect(tag).toMatchObject({ initialized: true, segments: expect.any(Array) });
    expect(typeof tag.segments[tag.currentPos].value).toBe("string");
    expect(data.snowflake).toMatchObject({
      enabled: true,
      state: "held",
      workerId: 0,
      registry: "local",
    });
    expect(data.redisSequence).toEqual({ enabled: false });
    const store = (await get(server, "/api/v1/monitor/store")).json();
    expect(store.rows.map((r: { tag: string }) => r.tag)).toContain("leaf-segment-test");
    const cache = await get(server, "/cache");
    expect(cache.statusCode).toBe(302);
    expect(cache.headers.location).toBe("/monitor");
    expect((await get(server, "/db")).headers.location).toBe("/monitor#store");
  });

  it("takes no id for a HEAD request, while the health checks answer HEAD", async () => {
    const before = (await get(server, "/api/v1/snowflake/id")).json().id;
    const head = await server.app.inject({ method: "HEAD", url: "/api/snowflake/get/x" });
    expect(head.statusCode).toBe(405);
    expect(head.headers.allow).toBe("DELETE, GET, PATCH, POST, PUT");
    expect((await server.app.inject({ method: "HEAD", url: "/health/live" })).statusCode).toBe(200);
    expect((await server.app.inject({ method: "HEAD", url: "/health/ready" })).statusCode).toBe(
      200,
    );
    const after = (await get(server, "/api/v1/snowflake/id")).json().id;
    expect(BigInt(after) > BigInt(before)).toBe(true);
  });

  it("answers 404 with a pointer to the API document for an unknown route, 405 for a wrong method", async () => {
    const res = await get(server, "/api/segment/nothing");
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({
      code: "NOT_FOUND",
      message: expect.stringContaining("/openapi.json"),
    });
    const post = await server.app.inject({ method: "POST", url: "/api/v1/snowflake/id" });
    expect(post.statusCode).toBe(405);
    expect(post.headers.allow).toBe("GET");
    expect(post.json()).toMatchObject({
      code: "METHOD_NOT_ALLOWED",
      message: expect.stringContaining("/openapi.json"),
    });
    // Java Leaf's paths answer POST as Java Leaf does (@RequestMapping without a method).
    const java = await server.app.inject({
      method: "POST",
      url: "/api/segment/get/leaf-segment-test",
    });
    expect(java.statusCode).toBe(200);
    expect(java.body).toMatch(DECIMAL);
  });
});
