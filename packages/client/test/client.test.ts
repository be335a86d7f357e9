// The client against a real Leaf server (in this process, embedded store, real HTTP): segment ids
// from ranges with adaptive sizes, snowflake batches with a maximum age, tokens, typed errors, and
// failover past a server that refuses connections and one that accepts and never answers.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LeafServer, loadConfig, startServer } from "@leaf/server";
import { freePort, TcpProxy, waitUntil } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isLeafClientError, LeafClient, type LeafClientError } from "../src/index";

const ADMIN = "client-test-admin";
const TOKEN = "client-test-token";
let server: LeafServer;
let dir: string;
/** A port nothing listens on: connections are refused. */
let deadUrl: string;
/** A server that accepts connections and never answers. */
let hung: Server;
let hungUrl: string;
const sockets: Socket[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "leaf-client-test-"));
  const config = loadConfig({
    values: {
      dataDir: dir,
      server: {
        host: "127.0.0.1",
        port: 0,
        drainMs: 0,
        adminToken: ADMIN,
        accessTokens: { "secret-tag": [TOKEN], constructor: [TOKEN] },
      },
      segment: { demoTag: "" },
      snowflake: { local: { workerId: 1 } },
    },
    env: {},
  });
  server = await startServer(config, { logger: false });
  for (const [tag, step] of [
    ["orders", 1000],
    ["secret-tag", 1000],
    ["adaptive", 100_000],
    ["constructor", 1000],
    ["short-ranges", 10],
  ] as const) {
    const res = await fetch(`${server.url}/api/v1/admin/tags`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify({ tag, step }),
    });
    expect(res.status, await res.text()).toBe(201);
  }
  deadUrl = `http://127.0.0.1:${await freePort()}`;
  hung = createServer((socket) => {
    sockets.push(socket);
    socket.on("error", () => {});
  });
  await new Promise<void>((resolve) => hung.listen(0, "127.0.0.1", resolve));
  const address = hung.address();
  hungUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
}, 60_000);

afterAll(async () => {
  for (const s of sockets) s.destroy();
  if (hung) await new Promise((resolve) => hung.close(resolve));
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The error `work` rejects with (fails the test when it resolves). */
async function failure(work: Promise<unknown>): Promise<LeafClientError> {
  try {
    await work;
  } catch (error) {
    expect(isLeafClientError(error), String(error)).toBe(true);
    return error as LeafClientError;
  }
  throw new Error("expected a rejection");
}

describe("segment ids", () => {
  it("hands out unique ids from ranges, increasing within each range, across many refills", async () => {
    const client = new LeafClient({ servers: server.url });
    const orders = client.segment("orders", { minRangeSize: 50, targetSeconds: 0.01 });
    await orders.start();
    const ids: bigint[] = [];
    for (let i = 0; i < 50_000; i++) {
      try {
        ids.push(orders.nextIdSync());
      } catch (error) {
        if (!isLeafClientError(error, "CACHE_EMPTY")) throw error;
        ids.push(await orders.nextId());
      }
    }
    expect(new Set(ids).size).toBe(ids.length);
    expect(orders.stats().ranges).toBeGreaterThan(10);
    await client.close();
    expect(() => orders.nextIdSync()).toThrow(expect.objectContaining({ code: "CLOSED" }));
  });

  it("throws CACHE_EMPTY from nextIdSync before the first range, and nextId waits for it", async () => {
    const client = new LeafClient({ servers: server.url });
    const orders = client.segment("orders");
    let error: unknown;
    try {
      orders.nextIdSync();
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: "CACHE_EMPTY" });
    expect(typeof (await orders.nextId())).toBe("bigint");
    await client.close();
  });

  it("grows the range size to the observed rate (targetSeconds of ids per range)", async () => {
    const client = new LeafClient({ servers: server.url });
    const adaptive = client.segment("adaptive", { minRangeSize: 10, targetSeconds: 0.5 });
    await adaptive.start();
    expect(adaptive.stats().rangeSize).toBe(10);
    const until = performance.now() + 400;
    let n = 0;
    while (performance.now() < until) {
      for (let i = 0; i < 1000; i++) {
        await adaptive.nextId();
        n++;
      }
    }
    // Thousands of ids per second: a range of 0.5 s is far above the first 10.
    expect(adaptive.stats().rangeSize).toBeGreaterThan(1000);
    expect(adaptive.stats().handedOut).toBe(BigInt(n));
    await client.close();
  });

  it("gives decimal strings when asked", async () => {
    const client = new LeafClient({ servers: server.url });
    const orders = client.segment("orders", { ids: "string" });
    const id = await orders.nextId();
    expect(id).toMatch(/^[0-9]+$/);
    expect(orders.nextIdSync()).toBe((BigInt(id) + 1n).toString());
    await client.close();
  });

  it("rejects an unknown tag with the server's code and Leaf's -2, and leaves the breaker closed", async () => {
    const client = new LeafClient({ servers: [server.url] });
    const error = await failure(client.segment("no-such-tag").nextId());
    expect(error.code).toBe("UNKNOWN_TAG");
    expect(error.leafCode).toBe(-2);
    expect(error.status).toBe(404);
    expect(error.message).toMatch(/^\[leaf\] \[client\] /);
    expect(client.servers()[0]).toMatchObject({ state: "closed", consecutiveFailures: 0 });
    await client.close();
  });

  it("sends the tag's token, and names 401/403 when it is missing or wrong", async () => {
    const none = new LeafClient({ servers: server.url });
    expect((await failure(none.segment("secret-tag").nextId())).status).toBe(401);
    const wrong = new LeafClient({ servers: server.url, tokens: { "secret-tag": "nope" } });
    expect((await failure(wrong.segment("secret-tag").nextId())).status).toBe(403);
    const right = new LeafClient({ servers: server.url, tokens: { "secret-tag": TOKEN } });
    expect(typeof (await right.segment("secret-tag").nextId())).toBe("bigint");
    await Promise.all([none.close(), wrong.close(), right.close()]);
  });

  it("sends `token` for a tag named like an Object.prototype member that `tokens` does not list", async () => {
    const client = new LeafClient({
      servers: server.url,
      token: TOKEN,
      tokens: { "secret-tag": TOKEN },
    });
    expect(typeof (await client.segment("constructor").nextId())).toBe("bigint");
    await client.close();
  });
});

describe("servers", () => {
  it("fails over past a refused and a hung server, and opens their breakers", async () => {
    const client = new LeafClient({
      servers: [deadUrl, hungUrl, server.url],
      requestTimeoutMs: 200,
      breaker: { failures: 1, openMs: 60_000 },
    });
    const orders = client.segment("orders", { minRangeSize: 10, targetSeconds: 0.001 });
    const ids = new Set<bigint>();
    for (let i = 0; i < 200; i++) ids.add(await orders.nextId());
    expect(ids.size).toBe(200);
    const [dead, hang, good] = client.servers();
    expect(dead).toMatchObject({ state: "open" });
    expect(dead!.lastError).toContain("could not be reached");
    expect(hang).toMatchObject({ state: "open" });
    expect(hang!.lastError).toContain("did not answer within");
    expect(good).toMatchObject({ state: "closed", consecutiveFailures: 0 });
    expect(good!.successes).toBeGreaterThan(10);
    await client.close();
  });

  it("when every server fails, a failed trial opens its breaker for openMs again, not doubled, and the pool finds a server back", async () => {
    // Two servers down (connections refused) for 1.5 s, then one of them back: with the open time
    // doubled at each failed trial (50, 100, 200, ... ms), the pool would skip the servers for up to
    // maxOpenMs after they came back (a nemesis run: 30 s after a tag refused on every server); an
    // outage of every server keeps each breaker at openMs.
    const port = await freePort();
    const down = [deadUrl, `http://127.0.0.1:${port}`];
    const client = new LeafClient({
      servers: down,
      timeoutMs: 100,
      retries: 0,
      breaker: { failures: 1, openMs: 50, maxOpenMs: 60_000 },
    });
    const orders = client.segment("orders");
    const failed = new Set<string>();
    const until = performance.now() + 1500;
    while (performance.now() < until) {
      failed.add((await failure(orders.nextId())).code);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect([...failed].every((code) => code === "TIMEOUT" || code === "UNAVAILABLE")).toBe(true);
    const trials = client.servers().map((s) => s.failures);
    expect(Math.min(...trials), "each server's breaker let several trials through").toBeGreaterThan(
      5,
    );
    for (const s of client.servers()) {
      expect(s.state).not.toBe("closed");
      expect(s.retryInMs ?? 0, s.url).toBeLessThanOrEqual(60); // 50 ms +20 %, never doubled
    }

    // The second server comes back (a proxy to the running one on its port): the pool finds it.
    const back = await TcpProxy.start({ targetPort: Number(new URL(server.url).port), port });
    try {
      // retries: 0, so a call while both breakers are open fails at once: ask again.
      let id: bigint | undefined;
      const deadline = performance.now() + 2000;
      while (id === undefined && performance.now() < deadline) {
        id = await orders.nextId({ timeoutMs: 200 }).catch(() => undefined);
        if (id === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(typeof id).toBe("bigint");
    } finally {
      await client.close();
      await back.close();
    }
  });

  it("bounds a refill of many short ranges by timeoutMs: the request in flight at the deadline is stopped", async () => {
    // The server's ranges end with its segment (step 10, doubling), so a refill of 5,000 ids takes
    // about 9 requests; each answer comes 300 ms late, so the refill needs 2.7 s against a
    // timeoutMs of 1 s. How many requests fit in that second depends on the machine's load: what
    // is checked is that the one in flight at the deadline is stopped there, before its answer.
    const started: number[] = [];
    const aborted: Array<{ request: number; atMs: number; afterMs: number }> = [];
    const slowFetch: typeof fetch = async (input, init) => {
      const at = performance.now();
      const request = started.push(at) - 1;
      await new Promise<void>((resolve, reject) => {
        const signal = init?.signal;
        const onAbort = () => {
          clearTimeout(timer);
          aborted.push({ request, atMs: performance.now(), afterMs: performance.now() - at });
          reject(signal!.reason);
        };
        const timer = setTimeout(() => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        }, 300);
        signal?.addEventListener("abort", onAbort);
      });
      return fetch(input, init);
    };
    const client = new LeafClient({
      servers: server.url,
      fetch: slowFetch,
      timeoutMs: 1000,
      requestTimeoutMs: 5000,
      retries: 0,
    });
    const tag = client.segment("short-ranges", { minRangeSize: 5000 });
    const first = performance.now();
    await tag.start();
    await waitUntil("the first refill to end", () => aborted.length > 0, 15_000);
    const stop = aborted[0]!;
    // Several short ranges were asked one after the other; the last one started before the
    // deadline and was stopped before its answer came (requestTimeoutMs is 5 s: nothing else stops
    // it), at the deadline and not before.
    expect(stop.request).toBeGreaterThanOrEqual(1);
    expect(started[stop.request]! - first).toBeLessThan(1000);
    expect(stop.afterMs).toBeLessThan(300);
    expect(stop.atMs - first).toBeGreaterThanOrEqual(990);
    await client.close();
  });

  it("fails with TIMEOUT at the call's deadline when no server answers", async () => {
    const client = new LeafClient({ servers: [hungUrl], timeoutMs: 300, requestTimeoutMs: 5000 });
    const started = performance.now();
    const error = await failure(client.segment("orders").nextId());
    expect(error.code, error.message).toBe("TIMEOUT");
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
    await client.close();
  });

  it("fails with UNAVAILABLE listing each server's failure when every server refuses", async () => {
    const client = new LeafClient({ servers: [deadUrl], retries: 2, retryBaseMs: 5 });
    const error = await failure(client.segment("orders").nextId());
    expect(error.code).toBe("UNAVAILABLE");
    expect(error.attempts.length).toBeGreaterThanOrEqual(1);
    expect(error.message).toContain(deadUrl);
    await client.close();
  });

  it("stops waiting when the caller's AbortSignal fires", async () => {
    const client = new LeafClient({
      servers: [hungUrl],
      timeoutMs: 10_000,
      requestTimeoutMs: 10_000,
    });
    const controller = new AbortController();
    const pending = client.segment("orders").nextId({ signal: controller.signal });
    setTimeout(() => controller.abort(new Error("caller gave up")), 50);
    expect((await failure(pending)).code).toBe("ABORTED");
    await client.close();
  });

  it("refuses bad options with INVALID_ARGUMENT naming the option", () => {
    expect(() => new LeafClient({ servers: [] })).toThrow(/invalid servers/);
    expect(() => new LeafClient({ servers: "ftp://x" })).toThrow(/invalid servers: "ftp:\/\/x"/);
    expect(() => new LeafClient({ servers: server.url, timeoutMs: 0 })).toThrow(
      /invalid timeoutMs: 0/,
    );
    const client = new LeafClient({ servers: server.url });
    expect(() => client.segment("orders", { refillThreshold: 0 })).toThrow(
      /invalid refillThreshold: 0/,
    );
    expect(() => client.segment("")).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
    // Base URLs every request would miss: an empty query or fragment (the paths are appended to
    // the text), credentials (fetch refuses a URL with them).
    for (const url of [`${server.url}?`, `${server.url}/#`, `${server.url}#x`]) {
      expect(() => new LeafClient({ servers: url }), url).toThrow(
        `invalid servers: ${JSON.stringify(url)}`,
      );
    }
    const withCredentials = server.url.replace("http://", "http://user:secret@");
    expect(() => new LeafClient({ servers: withCredentials })).toThrow(
      `invalid servers: ${JSON.stringify(server.url.replace("http://", "http://user:***@"))}`,
    );
    // Dot segments: the URL path drops them, so the server would never see the tag.
    for (const tag of [".", ".."]) {
      expect(() => client.segment(tag), tag).toThrow(`invalid tag: ${JSON.stringify(tag)}`);
    }
    expect(client.segment(".x")).toBeDefined();
  });
});

describe("snowflake ids", () => {
  it("hands out prefetched ids, unique and increasing within a batch", async () => {
    const client = new LeafClient({ servers: server.url });
    const flakes = client.snowflake({ batchSize: 500 });
    await flakes.start();
    const ids: bigint[] = [];
    for (let i = 0; i < 5000; i++) ids.push(await flakes.nextId());
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < 500; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    await client.close();
  });

  it("a call waiting when the client closes gets CLOSED, as segment ids do, and so does start() after it", async () => {
    const client = new LeafClient({ servers: [hungUrl], timeoutMs: 5000, requestTimeoutMs: 5000 });
    const flakes = client.snowflake();
    const orders = client.segment("orders");
    const waiting = [failure(flakes.nextId()), failure(orders.nextId())];
    await new Promise((resolve) => setTimeout(resolve, 100));
    await client.close();
    expect((await Promise.all(waiting)).map((e) => e.code)).toEqual(["CLOSED", "CLOSED"]);
    expect((await failure(flakes.start())).code).toBe("CLOSED");
    expect((await failure(orders.start())).code).toBe("CLOSED");
  });

  it("drops ids older than maxAgeMs, so that an id's time part stays recent", async () => {
    const client = new LeafClient({ servers: server.url });
    const flakes = client.snowflake({ batchSize: 100, maxAgeMs: 100 });
    const first = await flakes.nextId();
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(() => flakes.nextIdSync()).toThrow(expect.objectContaining({ code: "CACHE_EMPTY" }));
    const later = await flakes.nextId();
    expect(flakes.droppedIds).toBeGreaterThan(0);
    // Leaf's layout: the time part is above bit 22; 250 ms apart is visible there.
    expect((later >> 22n) - (first >> 22n)).toBeGreaterThanOrEqual(200n);
    await client.close();
  });
});
