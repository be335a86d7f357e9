// Pathological JSON bodies on the admin API: nesting thousands of levels deep, huge keys, keys
// named __proto__ or constructor. Each gets a 4xx in the project's error shape, never a 500, and
// no body changes a tag or the server's objects.
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers";

const ADMIN = "admin-token-0123456789abcdef";
const HEADERS = { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" };
let test: TestServer;

beforeAll(async () => {
  test = await startTestServer({ server: { adminToken: ADMIN } });
});

afterAll(async () => {
  await test?.stop();
});

/** `depth` arrays inside each other around `inner`: [[[...inner...]]]. */
function deepArray(depth: number, inner = "1"): string {
  return `${"[".repeat(depth)}${inner}${"]".repeat(depth)}`;
}

/** `depth` objects inside each other around `inner`: {"a":{"a":...inner...}}. */
function deepObject(depth: number, inner = "1"): string {
  return `${'{"a":'.repeat(depth)}${inner}${"}".repeat(depth)}`;
}

/** Nesting that alternates objects and arrays: {"a":[{"a":[...]}]}. */
function deepMixed(depth: number): string {
  return `${'{"a":['.repeat(depth)}1${"]}".repeat(depth)}`;
}

const HUGE_KEY = "k".repeat(60_000);

/** Raw JSON texts, each wrong for the admin API in its own way. */
const BODIES: Array<[string, string]> = [
  ["a body that is an array nested 5,000 deep", deepArray(5000)],
  ["a body that is an object nested 5,000 deep", deepObject(5000)],
  ["a body nesting objects and arrays 3,000 deep", deepMixed(3000)],
  ["tag nested 5,000 arrays deep", `{"tag":${deepArray(5000, '"order"')},"step":1000}`],
  ["step nested 5,000 objects deep", `{"tag":"deep-step","step":${deepObject(5000)}}`],
  [
    "startId nested 5,000 arrays deep",
    `{"tag":"deep-start","step":10,"startId":${deepArray(5000)}}`,
  ],
  [
    "description nested 5,000 objects deep",
    `{"tag":"deep-description","step":10,"description":${deepObject(5000, '"x"')}}`,
  ],
  ["an unknown field nested 5,000 deep", `{"tag":"deep-unknown","step":10,"x":${deepArray(5000)}}`],
  ["an unknown field with a 60,000-character name", `{"${HUGE_KEY}":1}`],
  ["a 60,000-character tag", `{"tag":"${"t".repeat(60_000)}","step":10}`],
  ["a field named __proto__", '{"__proto__":{"step":10},"tag":"proto-1"}'],
  [
    "a field named __proto__ holding an admin flag",
    '{"tag":"proto-2","step":10,"__proto__":{"admin":true}}',
  ],
  ["a field named constructor", '{"tag":"proto-3","step":10,"constructor":{"prototype":{"x":1}}}'],
  [
    "__proto__ nested deep inside a field",
    `{"tag":"proto-4","step":10,"x":${deepObject(2000, '{"__proto__":{"polluted":1}}')}}`,
  ],
  ["60,000 levels of open arrays (unterminated)", "[".repeat(60_000)],
  ["a body that is a bare string", '"tag"'],
  ["a body that is null", "null"],
  ["a step of 1e400", '{"tag":"big-step","step":1e400}'],
];

/** Fails unless the answer is a 4xx in the project's JSON error shape with a clear message. */
function expectClearRefusal(res: LightMyRequestResponse, what: string): void {
  const shown = `${what} -> ${res.statusCode} ${res.body.slice(0, 300)}`;
  expect(res.statusCode, shown).toBeGreaterThanOrEqual(400);
  expect(res.statusCode, shown).toBeLessThan(500);
  expect(String(res.headers["content-type"]), shown).toMatch(/^application\/json/);
  const body = res.json() as Record<string, unknown>;
  expect(body.status, shown).toBe(res.statusCode);
  expect(typeof body.code, shown).toBe("string");
  expect(body.code, shown).not.toBe("INTERNAL");
  expect(typeof body.message, shown).toBe("string");
  expect(String(body.message), shown).toMatch(/^\[leaf\] \[server\] /);
  // A clear message names what was expected, and stays readable: no 60 KB echo of the input.
  expect(String(body.message).length, shown).toBeLessThan(1000);
  expect(res.body.length, shown).toBeLessThan(4000);
}

describe("pathological JSON bodies on the admin API", () => {
  it.each(BODIES)("POST /api/v1/admin/tags with %s answers a clear 4xx", async (what, payload) => {
    const res = await test.server.app.inject({
      method: "POST",
      url: "/api/v1/admin/tags",
      headers: HEADERS,
      payload,
    });
    expectClearRefusal(res, what);
  });

  it.each(BODIES)(
    "PATCH /api/v1/admin/tags/:tag with %s answers a clear 4xx",
    async (what, payload) => {
      const res = await test.server.app.inject({
        method: "PATCH",
        url: "/api/v1/admin/tags/leaf-segment-test",
        headers: HEADERS,
        payload,
      });
      expectClearRefusal(res, what);
    },
  );

  it("names the bad field and what was expected for a deeply nested value", async () => {
    const res = await test.server.app.inject({
      method: "POST",
      url: "/api/v1/admin/tags",
      headers: HEADERS,
      payload: `{"tag":"deep-named","step":${deepArray(5000)}}`,
    });
    expect(res.statusCode).toBe(400);
    const body = res.json() as { code: string; message: string; details: { name: string } };
    expect(body.code).toBe("INVALID_ARGUMENT");
    expect(body.details.name).toBe("step");
    expect(body.message).toContain("invalid step");
    expect(body.message).toContain("expected an integer from 1 to");
  });

  it("says why a __proto__ or constructor key is refused", async () => {
    for (const payload of [
      '{"__proto__":{"step":10},"tag":"proto-1"}',
      '{"tag":"proto-3","step":10,"constructor":{"prototype":{"x":1}}}',
    ]) {
      const res = await test.server.app.inject({
        method: "POST",
        url: "/api/v1/admin/tags",
        headers: HEADERS,
        payload,
      });
      expect(res.statusCode).toBe(400);
      const body = res.json() as { code: string; message: string };
      expect(body.code).toBe("BAD_REQUEST");
      expect(body.message).toContain("__proto__");
      expect(body.message).toContain("send a JSON object");
    }
  });

  it("creates no tag and pollutes no prototype, and the server keeps answering", async () => {
    const list = await test.server.app.inject({
      method: "GET",
      url: "/api/v1/admin/tags",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(list.statusCode).toBe(200);
    const tags = (list.json() as { tags: Array<{ tag: string; step: number }> }).tags;
    const names = tags.map((t) => t.tag);
    for (const made of ["deep-step", "deep-start", "deep-description", "deep-unknown", "proto-1"]) {
      expect(names).not.toContain(made);
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
    expect(({} as Record<string, unknown>).step).toBeUndefined();
    const id = await test.server.app.inject({
      method: "GET",
      url: "/api/segment/get/leaf-segment-test",
    });
    expect(id.statusCode).toBe(200);
  });
});
