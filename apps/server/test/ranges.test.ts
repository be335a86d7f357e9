// The range endpoint: whole runs of segment ids from the server's buffers, cut at the segment's end,
// with the tag's access token, in the metrics, and never overlapping the other id endpoints.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { get, startTestServer, type TestServer } from "./helpers";

const ADMIN = "admin-token-for-ranges";
const TOKEN = "range-token";
let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({
    segment: { demoTag: "" },
    snowflake: { enabled: false },
    server: { adminToken: ADMIN, accessTokens: { "secret-tag": [TOKEN] } },
  });
  for (const [tag, step, startId] of [
    ["ranges", 1000, "1"],
    ["secret-tag", 100, "1"],
    ["big", 1000, "9007199254740000"],
  ] as const) {
    const created = await t.server.app.inject({
      method: "POST",
      url: "/api/v1/admin/tags",
      headers: { authorization: `Bearer ${ADMIN}` },
      payload: { tag, step, startId },
    });
    expect(created.statusCode).toBe(201);
  }
}, 60_000);

afterAll(async () => {
  await t?.stop();
});

interface RangeBody {
  tag: string;
  start: string;
  end: string;
  count: number;
}

async function range(tag: string, count: number): Promise<RangeBody> {
  const res = await get(t.server, `/api/v1/segment/${tag}/range?count=${count}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as RangeBody;
}

describe("GET /api/v1/segment/:tag/range", () => {
  it("hands out half-open ranges cut at the segment's end, never overlapping the single-id endpoint", async () => {
    const seen = new Set<bigint>();
    const take = (id: bigint) => {
      expect(seen.has(id), `id ${id} twice`).toBe(false);
      seen.add(id);
    };
    let asked = 0;
    let short = 0;
    for (let round = 0; round < 60; round++) {
      const r = await range("ranges", 170);
      const start = BigInt(r.start);
      const end = BigInt(r.end);
      expect(r.tag).toBe("ranges");
      expect(r.count).toBe(Number(end - start));
      expect(r.count).toBeGreaterThanOrEqual(1);
      expect(r.count).toBeLessThanOrEqual(170);
      if (r.count < 170) short++;
      for (let id = start; id < end; id++) take(id);
      asked += r.count;
      const single = await get(t.server, "/api/v1/segment/ranges/id");
      take(BigInt((single.json() as { id: string }).id));
    }
    // 60 rounds of 171 ids cross several segments of 1000: some ranges were cut at a segment end.
    expect(short).toBeGreaterThan(0);
    expect(seen.size).toBe(asked + 60);
  });

  it("counts every id of a range in leaf_ids_issued_total and the range in leaf_segment_ranges_total", async () => {
    const before = await get(t.server, "/metrics");
    const issued = (text: string) =>
      Number(/leaf_ids_issued_total\{mode="segment",tag="ranges"\} (\d+)/.exec(text)?.[1] ?? 0);
    const ranges = (text: string) =>
      Number(/leaf_segment_ranges_total\{tag="ranges"\} (\d+)/.exec(text)?.[1] ?? 0);
    const r = await range("ranges", 50);
    const after = await get(t.server, "/metrics");
    expect(issued(after.body) - issued(before.body)).toBe(r.count);
    expect(ranges(after.body) - ranges(before.body)).toBe(1);
  });

  it("keeps ids above 2^53 exact (decimal strings)", async () => {
    const r = await range("big", 10);
    expect(r.start).toBe("9007199254740000");
    expect(r.end).toBe("9007199254740010");
    const next = await range("big", 995);
    expect(next.start).toBe("9007199254740010");
    expect(next.end).toBe("9007199254741000");
  });

  it("needs the tag's access token", async () => {
    const none = await get(t.server, "/api/v1/segment/secret-tag/range?count=5");
    expect(none.statusCode).toBe(401);
    const wrong = await get(t.server, "/api/v1/segment/secret-tag/range?count=5&token=nope");
    expect(wrong.statusCode).toBe(403);
    const ok = await get(t.server, "/api/v1/segment/secret-tag/range?count=5", {
      authorization: `Bearer ${TOKEN}`,
    });
    expect(ok.statusCode).toBe(200);
    expect((ok.json() as RangeBody).count).toBe(5);
  });

  it("refuses a missing or out-of-bounds count, naming it, and an unknown tag with Leaf's -2", async () => {
    for (const q of ["", "?count=0", "?count=2147483648", "?count=1.5", "?count=-1"]) {
      const res = await get(t.server, `/api/v1/segment/ranges/range${q}`);
      expect(res.statusCode, q).toBe(400);
      expect(res.json()).toMatchObject({ code: "INVALID_ARGUMENT" });
      expect((res.json() as { message: string }).message).toContain("invalid count");
    }
    const unknown = await get(t.server, "/api/v1/segment/nope/range?count=5");
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ code: "UNKNOWN_TAG", leafCode: -2 });
  });

  it("is described in the OpenAPI document", async () => {
    const doc = (await get(t.server, "/openapi.json")).json() as {
      paths: Record<string, unknown>;
    };
    expect(doc.paths["/api/v1/segment/{tag}/range"]).toBeDefined();
  });
});
