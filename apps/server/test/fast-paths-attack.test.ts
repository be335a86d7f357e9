// Attacks on the single-id fast path (src/fast-paths.ts): requests, configurations, timings and
// faults where it could answer otherwise than the fastify route, take an id it does not hand out,
// count an answer twice, or break another feature. Every id is counted. Each test compares the fast
// path (a plain GET) with the fastify route itself (the same path with an empty query string `?`,
// which the fast path leaves to fastify) on the same server.
import dns from "node:dns";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { countDuplicates, FakeClock, freePort, httpGet, keepAliveAgent } from "@leaf/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serverProcess, sleep } from "./fault-servers";
import { startTestServer, type TestServer } from "./helpers";
import { removeServerFolders, workersServer } from "./workers-process";

const TAG = "leaf-segment-test";
const dirs: string[] = [];
let test: TestServer;

beforeAll(async () => {
  test = await startTestServer();
});

afterAll(async () => {
  await test?.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** One answer read off a raw socket: status line, headers (lower-case names), body. */
interface RawAnswer {
  head: string;
  status: number;
  headers: Map<string, string>;
  body: string;
}

/**
 * Writes `text` on a new connection to `port` (`host` 127.0.0.1 unless given) and reads until the
 * server closes it or `waitMs` passed; `reset`: the client resets the connection right after its
 * write (RST, nothing read).
 */
function exchange(
  port: number,
  text: string,
  options: { waitMs?: number; reset?: boolean; host?: string } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, options.host ?? "127.0.0.1");
    let out = "";
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(out);
    }, options.waitMs ?? 2000);
    socket.setEncoding("latin1").on("data", (chunk: string) => {
      out += chunk;
    });
    socket.on("error", (error) => {
      clearTimeout(timer);
      if (options.reset) resolve(out);
      else reject(error);
    });
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(out);
    });
    socket.write(text, () => {
      if (options.reset) socket.resetAndDestroy();
    });
  });
}

/** Splits what a connection received into answers (each with a Content-Length body). */
function answersIn(text: string): RawAnswer[] {
  const out: RawAnswer[] = [];
  let rest = text;
  while (rest.length > 0) {
    const end = rest.indexOf("\r\n\r\n");
    if (end < 0) break;
    const head = rest.slice(0, end);
    const lines = head.split("\r\n");
    const status = Number(lines[0]!.split(" ")[1]);
    const headers = new Map<string, string>();
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
    }
    const length = status === 100 ? 0 : Number(headers.get("content-length") ?? 0);
    out.push({ head, status, headers, body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + length);
  }
  return out;
}

/** The request line and headers of a GET of `path`, with `extra` header lines. */
function getRequest(path: string, extra: string[] = [], version = "HTTP/1.1"): string {
  return [`GET ${path} ${version}`, "Host: leaf", ...extra, "", ""].join("\r\n");
}

/** An answer's head with the Date header taken out (the only part that may differ). */
function headWithoutDate(answer: RawAnswer): string {
  return answer.head
    .split("\r\n")
    .filter((line) => !line.toLowerCase().startsWith("date:"))
    .join("\r\n");
}

async function scrape(port: number): Promise<string> {
  return (await httpGet(port, "/metrics", { timeoutMs: 10_000 })).body;
}

/** The value of one series in Prometheus text (0 when absent). */
function sample(text: string, name: string, labels: string): number {
  const prefix = `${name}{${labels}} `;
  const line = text.split("\n").find((l) => l.startsWith(prefix));
  return line === undefined ? 0 : Number(line.slice(prefix.length));
}

const SEGMENT_ROUTE = 'method="GET",route="/api/segment/get/:key",status_code="200"';
const SEGMENT_ISSUED = `mode="segment",tag="${TAG}"`;

/** The next segment id of TAG, asked through the fastify route (a batch of one). */
async function nextSegmentId(port: number): Promise<bigint> {
  const answer = await httpGet(port, `/api/segment/get/${TAG}?count=1`, { timeoutMs: 10_000 });
  expect(answer.status).toBe(200);
  return BigInt(answer.body.trim());
}

describe("the fast path's answers are the route's, byte for byte", () => {
  it("HTTP/1.1, HTTP/1.0 (with and without keep-alive), Expect: 100-continue, Connection: close, Accept-Version, Accept: JSON, odd plain keys", async () => {
    const { port } = test.server;
    // The tag's first range is loaded. On a busy machine that first load can outlast
    // segment.exhaustedWaitMs (503 SEGMENTS_EXHAUSTED, seen once in a fresh-clone CI run): asked
    // again until it answers.
    for (let tries = 0; ; tries++) {
      const first = await httpGet(port, `/api/segment/get/${TAG}?count=1`, { timeoutMs: 10_000 });
      if (first.status === 200) break;
      expect(first.status, `the first id, try ${tries + 1}: ${first.body}`).toBe(503);
      expect(tries).toBeLessThan(20);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const variants: Array<{ name: string; extra: string[]; version?: string }> = [
      { name: "HTTP/1.1", extra: [] },
      { name: "HTTP/1.0", extra: [], version: "HTTP/1.0" },
      { name: "HTTP/1.0 keep-alive", extra: ["Connection: keep-alive"], version: "HTTP/1.0" },
      { name: "Expect", extra: ["Expect: 100-continue"] },
      { name: "Content-Length: 0", extra: ["Content-Length: 0"] },
      { name: "Connection: close", extra: ["Connection: close"] },
      { name: "Accept-Version", extra: ["Accept-Version: 1.0.0"] },
      { name: "Accept JSON", extra: ["Accept: application/json"] },
      { name: "Upgrade", extra: ["Connection: Upgrade", "Upgrade: websocket"] },
    ];
    for (const path of [`/api/segment/get/${TAG}`, "/api/snowflake/get/k"]) {
      for (const { name, extra, version } of variants) {
        const fast = answersIn(
          await exchange(port, getRequest(path, extra, version), { waitMs: 300 }),
        );
        const routed = answersIn(
          await exchange(port, getRequest(`${path}?`, extra, version), { waitMs: 300 }),
        );
        expect(fast.map(headWithoutDate), `${path} ${name}`).toEqual(routed.map(headWithoutDate));
        expect(fast.at(-1)!.body, `${path} ${name}`).toMatch(/^\d+$/);
      }
    }
    for (const key of [".", "..", "~", "-", "_", "a.b~c-d_e", "K".repeat(128)]) {
      const path = `/api/snowflake/get/${key}`;
      const fast = answersIn(await exchange(port, getRequest(path), { waitMs: 300 }));
      const routed = answersIn(await exchange(port, getRequest(`${path}?`), { waitMs: 300 }));
      expect(fast.map(headWithoutDate), key).toEqual(routed.map(headWithoutDate));
      expect(fast[0]!.status, key).toBe(200);
    }
  });

  it("takes no id for what it declines, and fastify answers those as before", async () => {
    const { port } = test.server;
    const declined = [
      `HEAD /api/segment/get/${TAG} HTTP/1.1\r\nHost: leaf\r\n\r\n`,
      `OPTIONS /api/segment/get/${TAG} HTTP/1.1\r\nHost: leaf\r\n\r\n`,
      `DELETE /api/segment/get/${TAG} HTTP/1.1\r\nHost: leaf\r\n\r\n`,
      getRequest(`/api/segment/get/${TAG}?cout=2`),
      getRequest(`/API/segment/get/${TAG}`),
      getRequest(`//api/segment/get/${TAG}`),
      getRequest(`/api/segment/get/${TAG}/`),
      getRequest(`/api/segment/get/${TAG}#x`),
      getRequest(`http://leaf/api/segment/get/${TAG}`),
      getRequest("/api/segment/get/leaf%2Dsegment%2Dtest%"),
      getRequest(`/api/segment/get/${"t".repeat(129)}`),
      getRequest("/api/segment/get/unknown-tag"),
      `GET /api/segment/get/${TAG} HTTP/1.1\r\nHost: leaf\r\nContent-Length: 3\r\n\r\nabc`,
      `GET /api/segment/get/${TAG} HTTP/1.1\r\nHost: leaf\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`,
    ];
    const statuses: number[] = [];
    for (const text of declined) {
      const before = await nextSegmentId(port);
      const answers = answersIn(await exchange(port, text, { waitMs: 300 }));
      const after = await nextSegmentId(port);
      const status = answers[0]?.status ?? 0;
      statuses.push(status);
      // A GET with a body is the route's (Java clients send bodies): one id, given in the answer.
      const gave = status === 200 && /^\d+$/.test(answers[0]!.body) ? 1n : 0n;
      expect(after - before - 1n, text.split("\r\n")[0]).toBe(gave);
    }
    // Java Leaf's paths answer every method (DELETE too) and fastify takes absolute-form targets.
    expect(statuses).toEqual([
      405, 405, 200, 400, 404, 404, 404, 400, 200, 400, 400, 404, 200, 200,
    ]);
  });

  it("pipelined: fast, routed and batch requests on one connection answer in order, each id once", async () => {
    const { port } = test.server;
    const first = await nextSegmentId(port);
    const one = getRequest(`/api/segment/get/${TAG}`);
    const routed = getRequest(`/api/segment/get/${TAG}?`);
    const batch = getRequest(`/api/segment/get/${TAG}?count=3`);
    const sequence = [one, one, routed, batch, one, routed, one, batch, one];
    const answers = answersIn(await exchange(port, sequence.join(""), { waitMs: 1000 }));
    expect(answers.map((a) => a.status)).toEqual(sequence.map(() => 200));
    const ids = answers.flatMap((a) => a.body.trim().split("\n")).map(BigInt);
    expect(ids).toEqual(ids.map((_, i) => first + 1n + BigInt(i)));
    expect(await nextSegmentId(port)).toBe(first + 1n + BigInt(ids.length));
  });

  it("a malformed request right after an id request on the same connection: the same answers as after the route", async () => {
    const { port } = test.server;
    const seen: Record<string, number[]> = {};
    for (const [name, path] of [
      ["route", `/api/segment/get/${TAG}?`],
      ["fast path", `/api/segment/get/${TAG}`],
    ] as const) {
      const text = `${getRequest(path)}GARBAGE\r\n\r\n`;
      seen[name] = answersIn(await exchange(port, text, { waitMs: 500 })).map((a) => a.status);
      const later = `${getRequest(path)}${getRequest("/health/live")}GARBAGE\r\n\r\n`;
      seen[`${name}, then another`] = answersIn(await exchange(port, later, { waitMs: 500 })).map(
        (a) => a.status,
      );
    }
    expect(seen["fast path"]).toEqual(seen.route);
    expect(seen["fast path, then another"]).toEqual(seen["route, then another"]);
  });
});

describe("counted as the route counts", () => {
  it("pipelined requests of a client that resets its connection: the same http_* counts and monitor activity as the route's", async () => {
    const { port } = test.server;
    const activity = test.server.context.metrics.activity.requestCount("segment", TAG);
    const counted: Record<string, { ids: bigint; http: number; issued: number; activity: number }> =
      {};
    for (const [name, path] of [
      ["route", `/api/segment/get/${TAG}?`],
      ["fast path", `/api/segment/get/${TAG}`],
    ] as const) {
      const before = await nextSegmentId(port);
      const metricsBefore = await scrape(port);
      const activityBefore = activity.n;
      await exchange(port, getRequest(path).repeat(200), { reset: true, waitMs: 500 });
      const after = await nextSegmentId(port);
      const metricsAfter = await scrape(port);
      counted[name] = {
        ids: after - before - 1n,
        http:
          sample(metricsAfter, "http_requests_total", SEGMENT_ROUTE) -
          sample(metricsBefore, "http_requests_total", SEGMENT_ROUTE) -
          1, // the batch of one read above
        issued:
          sample(metricsAfter, "leaf_ids_issued_total", SEGMENT_ISSUED) -
          sample(metricsBefore, "leaf_ids_issued_total", SEGMENT_ISSUED) -
          1,
        activity: activity.n - activityBefore - 1,
      };
    }
    console.log("client reset after 200 pipelined requests:", counted);
    expect(counted["fast path"]).toEqual(counted.route);
  });
});

describe("configurations", () => {
  it("server.host=localhost listens on every address of localhost, as fastify alone does (a hosts file with ::1 and 127.0.0.1)", async () => {
    // This machine's hosts file names 127.0.0.1 alone; most name ::1 too (Debian's default). The
    // resolver answers as such a file would; the server and fastify are real.
    const real = dns.lookup;
    const addresses = [
      { address: "::1", family: 6 },
      { address: "127.0.0.1", family: 4 },
    ];
    // biome-ignore lint/suspicious/noExplicitAny: dns.lookup's overloads
    (dns as any).lookup = (host: string, options: any, callback?: any) => {
      const cb = typeof options === "function" ? options : callback;
      const opts = typeof options === "object" && options !== null ? options : {};
      if (host !== "localhost") return real(host, options, callback);
      if (opts.all) process.nextTick(cb, null, addresses);
      else process.nextTick(cb, null, "::1", 6);
    };
    let local: TestServer | undefined;
    try {
      local = await startTestServer({ server: { host: "localhost" } });
      const { port } = local.server;
      const reached: Record<string, string> = {};
      for (const host of ["::1", "127.0.0.1"]) {
        try {
          const answers = answersIn(
            await exchange(port, getRequest("/api/snowflake/get/k", ["Connection: close"]), {
              host,
            }),
          );
          reached[host] = String(answers[0]?.status);
        } catch (error) {
          reached[host] = (error as NodeJS.ErrnoException).code ?? String(error);
        }
      }
      expect(reached).toEqual({ "::1": "200", "127.0.0.1": "200" });
    } finally {
      dns.lookup = real;
      await local?.stop();
    }
  });

  it("server.adminToken set: the fast path answers, the admin API still asks for the token; a tag deleted and created again through it repeats no id", async () => {
    const admin = "admin-secret-token-0123456789";
    const guarded = await startTestServer({ server: { adminToken: admin } });
    const auth = { authorization: `Bearer ${admin}` };
    try {
      const { port } = guarded.server;
      await nextSegmentId(port);
      const before = await scrape(port);
      const fast = answersIn(
        await exchange(port, getRequest(`/api/segment/get/${TAG}`, ["Connection: close"])),
      );
      expect(fast[0]!.status).toBe(200);
      const after = await scrape(port);
      expect(
        sample(after, "http_requests_total", SEGMENT_ROUTE) -
          sample(before, "http_requests_total", SEGMENT_ROUTE),
      ).toBe(1);
      expect((await httpGet(port, "/api/v1/admin/tags", { timeoutMs: 10_000 })).status).toBe(401);

      const tag = "fast-deleted";
      const create = (startId: string) =>
        guarded.server.app.inject({
          method: "POST",
          url: "/api/v1/admin/tags",
          headers: auth,
          payload: { tag, step: 50, startId },
        });
      expect((await create("1000")).statusCode).toBe(201);
      const ids: string[] = [];
      const take = async (path: string) => {
        const answers = answersIn(await exchange(port, getRequest(path, ["Connection: close"])));
        if (answers[0]!.status === 200) ids.push(answers[0]!.body);
        return answers[0]!;
      };
      for (let i = 0; i < 30; i++) expect((await take(`/api/segment/get/${tag}`)).status).toBe(200);
      const deleted = await guarded.server.app.inject({
        method: "DELETE",
        url: `/api/v1/admin/tags/${tag}`,
        headers: auth,
      });
      expect(deleted.statusCode).toBe(200);
      const gone = await take(`/api/segment/get/${tag}`);
      const goneRouted = await take(`/api/segment/get/${tag}?`);
      expect(gone.status).toBe(404);
      expect(gone.body).toBe(goneRouted.body);
      expect((await create(deleted.json().maxId as string)).statusCode).toBe(201);
      for (let i = 0; i < 30; i++) expect((await take(`/api/segment/get/${tag}`)).status).toBe(200);
      expect(ids.length).toBe(60);
      expect(countDuplicates([ids]).duplicates).toBe(0);
    } finally {
      await guarded.stop();
    }
  });
});

describe("real processes", () => {
  it("clock moved back past the tolerance: each refused request counts one clock rollback, fast path or route", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-fast-clock-"));
    dirs.push(dir);
    const clock = new FakeClock({ file: join(dir, "faketime.offset") });
    const server = serverProcess(
      "clock",
      dir,
      await freePort(),
      {
        name: "fast-clock",
        segment: { enabled: false },
        snowflake: { enabled: true, ip: "127.0.0.1", registry: "local", local: { workerId: 3 } },
      },
      clock,
    );
    try {
      await server.start();
      const agent = keepAliveAgent(1);
      for (let i = 0; i < 20; i++) {
        const answer = await httpGet(server.port, "/api/snowflake/get/k", {
          agent,
          timeoutMs: 5000,
        });
        expect(answer.status).toBe(200);
      }
      clock.set(-3000);
      const refused = 'action="refused"';
      const counts: Record<
        string,
        { refusedAnswers: number; rollbacks: number; logLines: number }
      > = {};
      for (const [name, path] of [
        ["route", "/api/snowflake/get/k?"],
        ["fast path", "/api/snowflake/get/k"],
      ] as const) {
        const before = sample(
          await scrape(server.port),
          "leaf_snowflake_clock_rollbacks_total",
          refused,
        );
        const linesBefore = server.output.split("ms: refused").length;
        let refusedAnswers = 0;
        for (let i = 0; i < 5; i++) {
          const answer = await httpGet(server.port, path, { agent, timeoutMs: 5000 });
          if (answer.status !== 200) refusedAnswers++;
        }
        await sleep(500); // the log lines reach the pipe
        const after = sample(
          await scrape(server.port),
          "leaf_snowflake_clock_rollbacks_total",
          refused,
        );
        counts[name] = {
          refusedAnswers,
          rollbacks: after - before,
          logLines: server.output.split("ms: refused").length - linesBefore,
        };
      }
      console.log("5 requests each with the clock 3 s back:", counts);
      agent.destroy();
      expect(counts["fast path"]).toEqual(counts.route);
    } finally {
      await server.kill();
    }
  }, 120_000);

  it("server.workers 2: every fast answer's id once, and /metrics (every worker's) counts each answer and id once", async () => {
    const server = await workersServer("fast-workers", { snowflake: { enabled: true } });
    try {
      await server.start();
      const port = server.port;
      const before = await scrape(port);
      const ids: string[] = [];
      const requests = 8 * 50;
      await Promise.all(
        Array.from({ length: 8 }, async (_, c) => {
          // A connection of its own per loop: the kernel spreads connections over the workers.
          const agent = keepAliveAgent(1);
          try {
            for (let i = 0; i < 50; i++) {
              const path = c % 2 === 0 ? `/api/segment/get/${TAG}` : "/api/snowflake/get/k";
              const answer = await httpGet(port, path, { agent, timeoutMs: 10_000 });
              expect(answer.status).toBe(200);
              ids.push(`${c % 2}:${answer.body}`);
            }
          } finally {
            agent.destroy();
          }
        }),
      );
      expect(countDuplicates([ids]).duplicates).toBe(0);
      expect(ids.length).toBe(requests);
      const after = await scrape(port);
      const snowflakeRoute = 'method="GET",route="/api/snowflake/get/:key",status_code="200"';
      const delta = (name: string, labels: string) =>
        sample(after, name, labels) - sample(before, name, labels);
      expect(delta("http_requests_total", SEGMENT_ROUTE)).toBe(requests / 2);
      expect(delta("http_requests_total", snowflakeRoute)).toBe(requests / 2);
      expect(delta("leaf_ids_issued_total", SEGMENT_ISSUED)).toBe(requests / 2);
      expect(delta("leaf_ids_issued_total", 'mode="snowflake",tag=""')).toBe(requests / 2);
    } finally {
      await server.stop();
      removeServerFolders();
    }
  }, 180_000);
});
