// The JSON API's string forms (`format=`, `prefix=`) on the segment and snowflake routes and on
// decode, a 53-bit snowflake layout from the configuration, and `leaf decode --format`. Every id
// handed out is parsed back and counted: none may repeat, and each form sorts as the ids do.
import { FriendlyIdFormat, IdEncoding, layouts, MAX_SAFE_ID } from "@leaf/core";
import { runNode } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLI } from "./cli-process";
import { get, startTestServer, type TestServer } from "./helpers";

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({ snowflake: { layout: "safe53ms" } });
});

afterAll(async () => {
  await t?.stop();
});

const ALPHABETS = ["base62", "base36", "base32"] as const;
const TAG = "/api/v1/segment/leaf-segment-test";

async function json(url: string) {
  const res = await get(t.server, url);
  expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
  return res.json();
}

const sortedAsStrings = (texts: string[]) =>
  [...texts].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

describe("format= on the id routes", () => {
  it("answers segment ids in every form, each parsing back to the next consecutive id", async () => {
    const seen = new Set<bigint>();
    let previous = BigInt((await json(`${TAG}/id`)).id);
    seen.add(previous);
    for (const alphabet of ALPHABETS) {
      for (const prefix of ["", "ord_"]) {
        const encoding = new IdEncoding({ alphabet, prefix });
        const q = `format=${alphabet}${prefix ? `&prefix=${prefix}` : ""}`;
        const one = await json(`${TAG}/id?${q}`);
        expect(one).toEqual({ tag: "leaf-segment-test", id: expect.any(String), format: alphabet });
        expect(one.id).toHaveLength(prefix.length + encoding.width);
        const id = encoding.parse(one.id);
        expect(id).toBe(previous + 1n);
        seen.add(id);
        // A batch long enough to cross a range (step 2,000): strings sort as the ids.
        const many = await json(`${TAG}/ids?count=2500&${q}`);
        expect(many.format).toBe(alphabet);
        expect(many.count).toBe(2500);
        const ids = (many.ids as string[]).map((text) => encoding.parse(text));
        expect(ids[0]).toBe(id + 1n);
        for (let i = 1; i < ids.length; i++) expect(ids[i]).toBe(ids[i - 1]! + 1n);
        expect(sortedAsStrings(many.ids)).toEqual(many.ids);
        for (const each of ids) seen.add(each);
        previous = ids.at(-1)!;
      }
    }
    expect(seen.size).toBe(1 + ALPHABETS.length * 2 * 2501);
  });

  it("answers snowflake ids of the configured 53-bit layout in every form, all distinct", async () => {
    const layout = layouts.safe53ms;
    const seen = new Set<bigint>();
    const decimal = await json("/api/v1/snowflake/ids?count=500");
    expect(decimal.format).toBeUndefined();
    for (const text of decimal.ids as string[]) {
      const id = BigInt(text);
      expect(id).toBeLessThanOrEqual(MAX_SAFE_ID);
      seen.add(id);
    }
    const forms = [
      ...ALPHABETS.map((alphabet) => ({
        name: alphabet,
        form: new IdEncoding({ alphabet, bits: 53, prefix: "u." }),
      })),
      { name: "friendly", form: new FriendlyIdFormat({ layout, prefix: "u." }) },
    ];
    for (const { name, form } of forms) {
      const one = await json(`/api/v1/snowflake/id?format=${name}&prefix=u.`);
      expect(one.format).toBe(name);
      seen.add(form.parse(one.id));
      const many = await json(`/api/v1/snowflake/ids?count=500&format=${name}&prefix=u.`);
      const ids = (many.ids as string[]).map((text) => form.parse(text));
      for (let i = 1; i < ids.length; i++) expect(ids[i]!).toBeGreaterThan(ids[i - 1]!);
      expect(sortedAsStrings(many.ids)).toEqual(many.ids);
      for (const id of ids) {
        expect(id).toBeLessThanOrEqual(MAX_SAFE_ID);
        seen.add(id);
      }
    }
    // base62 of a 53-bit layout is 9 characters wide.
    expect((await json("/api/v1/snowflake/id?format=base62")).id).toHaveLength(9);
    expect(seen.size).toBe(500 + 4 * 501);
  });

  it("refuses a bad format or prefix with a 400 naming it, and takes no id", async () => {
    const before = BigInt((await json(`${TAG}/id`)).id);
    const cases: [string, string, string][] = [
      [
        `${TAG}/id?format=hex`,
        "format",
        'invalid format: "hex"; expected "decimal" (default), "base62"',
      ],
      [
        `${TAG}/ids?count=3&format=friendly`,
        "format",
        '"friendly" writes the time, worker and sequence of snowflake ids',
      ],
      [`${TAG}/id?prefix=ord_`, "prefix", "no prefix with format=decimal"],
      [
        `${TAG}/id?format=base62&prefix=${encodeURIComponent("ord id")}`,
        "prefix",
        "up to 32 characters",
      ],
      [`${TAG}/id?format=base62&format=base36`, "format", "format given once"],
      ["/api/v1/snowflake/id?format=BASE62", "format", 'invalid format: "BASE62"'],
    ];
    for (const [url, name, message] of cases) {
      const res = await get(t.server, url);
      expect(res.statusCode, url).toBe(400);
      expect(res.json(), url).toMatchObject({
        code: "INVALID_ARGUMENT",
        message: expect.stringContaining(message),
        details: { name },
      });
    }
    expect(BigInt((await json(`${TAG}/id`)).id)).toBe(before + 1n);
  });

  it("lists format and prefix in the OpenAPI document of each id route", async () => {
    const doc = await json("/openapi.json");
    for (const path of [
      "/api/v1/segment/{tag}/id",
      "/api/v1/segment/{tag}/ids",
      "/api/v1/snowflake/id",
      "/api/v1/snowflake/ids",
      "/api/v1/decode/{id}",
    ]) {
      const names = (doc.paths[path].get.parameters as { name: string }[]).map((p) => p.name);
      expect(names, path).toEqual(expect.arrayContaining(["format", "prefix"]));
    }
  });
});

describe("decode of the string forms", () => {
  it("reads every form back to the same id and parts as the decimal", async () => {
    const id = BigInt((await json("/api/v1/snowflake/id")).id);
    const decimal = await json(`/api/v1/decode/${id}`);
    expect(decimal).toMatchObject({ id: String(id), layout: "safe53ms" });
    for (const name of [...ALPHABETS, "friendly"]) {
      const form =
        name === "friendly"
          ? new FriendlyIdFormat({ layout: layouts.safe53ms, prefix: "x_" })
          : new IdEncoding({
              alphabet: name as (typeof ALPHABETS)[number],
              bits: 53,
              prefix: "x_",
            });
      const encoded = form.encode(id);
      expect(await json(`/api/v1/decode/${encoded}?format=${name}&prefix=x_`)).toEqual(decimal);
    }
    // The README's examples, with Java Leaf's layout.
    for (const [text, format] of [
      ["2LMsBBgGSCe", "base62"],
      ["0ey8gcge84av4", "base36"],
      ["1PKT907572400", "base32"],
    ]) {
      expect((await json(`/api/v1/decode/${text}?layout=leaf&format=${format}`)).id).toBe(
        "1967871834224398336",
      );
    }
    expect(
      await json("/api/v1/decode/20200502121344602-0619-0018?layout=leaf&format=friendly"),
    ).toMatchObject({ id: "1256557484213448722", workerId: 619, sequence: 18 });
  });

  it("refuses a malformed string with INVALID_ID saying what is wrong, and a format with redis-sequence", async () => {
    const bad = await get(t.server, "/api/v1/decode/0000!0000?format=base62");
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({
      code: "INVALID_ID",
      message: expect.stringContaining('character "!" at index 4 is not base62'),
    });
    const short = await get(t.server, "/api/v1/decode/0000?format=base36");
    expect(short.json().message).toContain("4 characters after the prefix instead of 11");
    const redis = await get(t.server, "/api/v1/decode/1?layout=redis-sequence&format=base62");
    expect(redis.statusCode).toBe(400);
    expect(redis.json().message).toContain("no format or prefix with layout=redis-sequence");
  });
});

describe("leaf decode --format", () => {
  it("reads a string form, and refuses an unknown format as a usage error", async () => {
    const run = await runNode(
      CLI,
      ["decode", "ord_2LMsBBgGSCe", "--format", "base62", "--prefix", "ord_", "--json"],
      { timeoutMs: 30_000 },
    );
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ id: "1967871834224398336", layout: "leaf" });
    const friendly = await runNode(
      CLI,
      ["decode", "20200502121344602-0619-0018", "--format", "friendly"],
      { timeoutMs: 30_000 },
    );
    expect(friendly.code, friendly.stderr).toBe(0);
    expect(friendly.stdout).toContain("1256557484213448722 (friendly 20200502121344602-0619-0018)");
    expect(friendly.stdout).toMatch(/worker id\s+619/);
    const safe = await runNode(
      CLI,
      [
        "decode",
        new IdEncoding({ alphabet: "base32", bits: 53 }).encode(MAX_SAFE_ID),
        "--layout",
        "safe53s",
        "--format",
        "base32",
        "--json",
      ],
      { timeoutMs: 30_000 },
    );
    expect(safe.code, safe.stderr).toBe(0);
    expect(JSON.parse(safe.stdout)).toMatchObject({
      id: "9007199254740991",
      layout: "safe53s",
      workerId: 1023,
      sequence: 4095,
    });
    const unknown = await runNode(CLI, ["decode", "abc", "--format", "hex"], { timeoutMs: 30_000 });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain(
      '--format must be one of decimal, base62, base36, base32, friendly, got "hex"',
    );
    const malformed = await runNode(CLI, ["decode", "abc", "--format", "base62"], {
      timeoutMs: 30_000,
    });
    expect(malformed.code).toBe(1);
    expect(malformed.stderr).toContain('INVALID_ID: [leaf] [core] invalid base62 id "abc"');
  });
});
