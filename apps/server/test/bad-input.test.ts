import { isLeafError } from "@leaf/core";
import fc from "fast-check";
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONFIG_KEYS, loadConfig } from "../src/index";
import { startTestServer, type TestServer } from "./helpers";

const ADMIN = "admin-token-0123456789abcdef";
let test: TestServer;

beforeAll(async () => {
  test = await startTestServer({
    server: { adminToken: ADMIN, maxBatch: 500, accessTokens: { guarded: "guard-token-1" } },
  });
});

afterAll(async () => {
  await test?.stop();
});

const runs = { numRuns: 150 };

/** Any text: unicode, control characters, percent signs, slashes, very long. */
const anyText = fc.oneof(
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.constantFrom(
    "",
    " ",
    "%",
    "%zz",
    "..",
    "/",
    "-1",
    "0",
    "1e3",
    "0x10",
    "NaN",
    "9".repeat(30),
    "\u0000",
    "a\nb",
    "1,5",
  ),
  fc.string({ maxLength: 3000 }),
);

/** Fails unless the answer is a success or a 4xx that explains itself. Never a 5xx. */
function expectHandled(res: LightMyRequestResponse, what: string): void {
  expect(res.statusCode, `${what} -> ${res.statusCode} ${res.body.slice(0, 300)}`).toBeLessThan(
    500,
  );
  if (res.statusCode >= 400) {
    const message = res.headers["content-type"]?.toString().startsWith("application/json")
      ? String(res.json().message ?? "")
      : res.body;
    expect(message.length, what).toBeGreaterThan(10);
  }
}

function inject(url: string, headers: Record<string, string> = {}) {
  return test.server.app.inject({ method: "GET", url, headers });
}

describe("bad input on every parameter gets a 4xx with a clear message, never a 5xx", () => {
  it("the segment tag of Java Leaf's path and of the JSON API", async () => {
    await fc.assert(
      fc.asyncProperty(anyText, async (key) => {
        const encoded = encodeURIComponent(key);
        expectHandled(
          await inject(`/api/segment/get/${encoded}`),
          `segment key ${JSON.stringify(key)}`,
        );
        expectHandled(
          await inject(`/api/v1/segment/${encoded}/id`),
          `json tag ${JSON.stringify(key)}`,
        );
        expectHandled(
          await inject(`/api/v1/segment/${encoded}/ids?count=2`),
          `json tag ids ${JSON.stringify(key)}`,
        );
      }),
      runs,
    );
  });

  it("raw, not percent-encoded paths", async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: "binary", maxLength: 60 }), async (raw) => {
        const path = raw.replace(/[\s#?]/g, "");
        expectHandled(await inject(`/api/segment/get/${path}`), `raw path ${JSON.stringify(path)}`);
        expectHandled(
          await inject(`/api/snowflake/get/${path}`),
          `raw snowflake path ${JSON.stringify(path)}`,
        );
      }),
      runs,
    );
  });

  it("the snowflake key, and the key query parameter of the JSON API", async () => {
    await fc.assert(
      fc.asyncProperty(anyText, async (key) => {
        expectHandled(
          await inject(`/api/snowflake/get/${encodeURIComponent(key)}`),
          `snowflake key ${JSON.stringify(key)}`,
        );
        expectHandled(
          await inject(`/api/v1/snowflake/id?key=${encodeURIComponent(key)}`),
          `json key ${JSON.stringify(key)}`,
        );
      }),
      runs,
    );
  });

  it("count, on every batch endpoint", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(anyText, fc.integer().map(String), fc.bigInt().map(String)),
        async (count) => {
          const q = `count=${encodeURIComponent(count)}`;
          for (const url of [
            `/api/segment/get/leaf-segment-test?${q}`,
            `/api/snowflake/get/k?${q}`,
            `/api/v1/segment/leaf-segment-test/ids?${q}`,
            `/api/v1/snowflake/ids?${q}`,
          ]) {
            const res = await inject(url);
            expectHandled(res, `${url}`);
            const valid = /^[0-9]+$/.test(count) && Number(count) >= 1 && Number(count) <= 500;
            expect(res.statusCode, url).toBe(valid ? 200 : 400);
          }
        },
      ),
      runs,
    );
  });

  it("snowflakeId of /decodeSnowflakeId, and id and layout of the JSON decode", async () => {
    await fc.assert(
      fc.asyncProperty(anyText, fc.option(anyText), async (id, layout) => {
        const res = await inject(`/decodeSnowflakeId?snowflakeId=${encodeURIComponent(id)}`);
        expectHandled(res, `snowflakeId ${JSON.stringify(id)}`);
        if (res.statusCode === 400) expect(res.json().errorMsg).toBeTruthy();
        const q = layout === null ? "" : `?layout=${encodeURIComponent(layout)}`;
        expectHandled(
          await inject(`/api/v1/decode/${encodeURIComponent(id)}${q}`),
          `decode ${JSON.stringify(id)} ${layout}`,
        );
      }),
      runs,
    );
  });

  it("ids of every size and layout decode or are refused as INVALID_ID", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.bigInt({ min: -10n, max: 1n << 70n }),
        fc.constantFrom("snowflake", "leaf", "sonyflake", "baidu", "redis-sequence"),
        async (id, layout) => {
          const res = await inject(`/api/v1/decode/${id}?layout=${layout}`);
          expectHandled(res, `decode ${id} ${layout}`);
          const fits = id >= 0n && id < 1n << 63n;
          expect(res.statusCode === 200, `${id} ${layout}`).toBe(fits);
        },
      ),
      runs,
    );
  });

  it("the mode of readiness and the access token", async () => {
    await fc.assert(
      fc.asyncProperty(anyText, async (value) => {
        const enc = encodeURIComponent(value);
        expectHandled(await inject(`/health/ready?mode=${enc}`), `mode ${JSON.stringify(value)}`);
        expectHandled(
          await inject(`/api/segment/get/guarded?token=${enc}`),
          `token ${JSON.stringify(value)}`,
        );
        const header = value.replace(/[^\x20-\x7e]/g, "");
        expectHandled(
          await inject("/api/segment/get/guarded", { authorization: `Bearer ${header}` }),
          "bearer",
        );
        expectHandled(
          await inject("/api/v1/admin/tags", { authorization: header }),
          "admin authorization",
        );
      }),
      runs,
    );
  });

  it("every field of the admin API's bodies", async () => {
    const anyJson = fc.oneof(
      fc.jsonValue(),
      anyText,
      fc.bigInt().map(String),
      fc.double().filter(Number.isFinite),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.record(
          { tag: anyJson, step: anyJson, startId: anyJson, description: anyJson, other: anyJson },
          { requiredKeys: [] },
        ),
        async (body) => {
          const headers = { authorization: `Bearer ${ADMIN}` };
          const post = await test.server.app.inject({
            method: "POST",
            url: "/api/v1/admin/tags",
            headers,
            payload: body,
          });
          expectHandled(post, `create ${JSON.stringify(body).slice(0, 200)}`);
          const tag = typeof body.tag === "string" ? body.tag : "leaf-segment-test";
          const patch = await test.server.app.inject({
            method: "PATCH",
            url: `/api/v1/admin/tags/${encodeURIComponent(tag)}`,
            headers,
            payload: { step: body.step },
          });
          expectHandled(patch, `patch ${JSON.stringify(body).slice(0, 200)}`);
        },
      ),
      runs,
    );
  });

  it("raw request bodies of any content", async () => {
    await fc.assert(
      fc.asyncProperty(
        anyText,
        fc.constantFrom("application/json", "text/plain", "application/x-www-form-urlencoded", ""),
        async (payload, type) => {
          const headers: Record<string, string> = { authorization: `Bearer ${ADMIN}` };
          if (type) headers["content-type"] = type;
          const res = await test.server.app.inject({
            method: "POST",
            url: "/api/v1/admin/tags",
            headers,
            payload,
          });
          expectHandled(res, `body ${JSON.stringify(payload).slice(0, 100)} as ${type}`);
        },
      ),
      { numRuns: 100 },
    );
  });

  it("the server keeps answering after all of that", async () => {
    const res = await inject("/api/segment/get/leaf-segment-test");
    expect(res.statusCode).toBe(200);
    expect((await inject("/health/ready")).statusCode).toBe(200);
  });
});

describe("the admin API's body errors say what is wrong and what the method takes", () => {
  const send = (method: "POST" | "PATCH", payload: string, type = "application/json") =>
    test.server.app.inject({
      method,
      url: method === "POST" ? "/api/v1/admin/tags" : "/api/v1/admin/tags/leaf-segment-test",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": type },
      payload,
    });

  it("valid JSON with a __proto__ key is named as such, not as invalid JSON", async () => {
    for (const [payload, key] of [
      ['{"step":10,"__proto__":{"admin":true}}', "__proto__"],
      ['{"step":10,"x":[{"__proto__":1}]}', "x[0].__proto__"],
      ['{"step":10,"constructor":{"prototype":{}}}', "constructor.prototype"],
      ['{"step":10,"\\u005f_proto__":1}', "__proto__"],
    ] as const) {
      const res = await send("PATCH", payload);
      expect(res.statusCode, payload).toBe(400);
      const { code, message } = res.json();
      expect(code, payload).toBe("BAD_REQUEST");
      expect(message, payload).toContain(`the body is valid JSON but has the key ${key};`);
      expect(message, payload).not.toContain("not valid JSON");
    }
  });

  it('refuses to create the tags "." and "..", which no URL path can ask for', async () => {
    for (const tag of [".", ".."]) {
      const res = await send("POST", JSON.stringify({ tag, step: 10 }));
      expect(res.statusCode, tag).toBe(400);
      const { code, message } = res.json();
      expect(code, tag).toBe("INVALID_ARGUMENT");
      expect(message, tag).toContain('other than "." and ".."');
    }
    const tags = (
      await test.server.app.inject({
        url: "/api/v1/admin/tags",
        headers: { authorization: `Bearer ${ADMIN}` },
      })
    ).json() as { tags: Array<{ tag: string }> };
    expect(tags.tags.map((t) => t.tag)).not.toContain(".");
  });

  it("invalid JSON says so with the parser's reason", async () => {
    const res = await send("POST", '{"tag": "x", "step": 10,}');
    expect(res.statusCode).toBe(400);
    const { message } = res.json();
    expect(message).toMatch(/the body is not valid JSON \(.*JSON.*\)/);
    expect(message).not.toContain("__proto__");
  });

  it("PATCH's hints show what PATCH takes (step only), POST's what POST takes", async () => {
    for (const payload of ["[1]", '"step"', "not json"]) {
      const patch = (await send("PATCH", payload)).json().message;
      expect(patch, payload).toContain('{"step": 5000} (the only field: step)');
      expect(patch, payload).not.toContain('"tag"');
      const post = (await send("POST", payload)).json().message;
      expect(post, payload).toContain('{"tag": "order", "step": 1000}');
    }
    const unknown = (await send("PATCH", '{"step": 5, "tag": "other"}')).json().message;
    expect(unknown).toContain("invalid tag");
    expect(unknown).toContain("the fields are step");
  });
});

describe("bad configuration values", () => {
  it("are refused as INVALID_CONFIG naming the key, never another error", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...CONFIG_KEYS.map((k) => k.env)),
        fc.oneof(anyText, fc.integer().map(String)),
        (env, value) => {
          try {
            loadConfig({ env: { [env]: value }, cwd: test.dir });
          } catch (error) {
            expect(isLeafError(error, "INVALID_CONFIG"), String(error)).toBe(true);
            expect((error as Error).message).toMatch(/LEAF_|snowflake|segment|redis/);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
