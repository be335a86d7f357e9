// /metrics of a real started server, scraped over HTTP after real requests: names dashboards know,
// route patterns (never raw URLs) as labels, and values that match what the requests did.
import { layouts } from "@leaf/core";
import { MAX_ID } from "@leaf/segment";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers";

let test: TestServer;
const TAG = "leaf-segment-test";

beforeAll(async () => {
  test = await startTestServer();
});

afterAll(async () => {
  await test?.stop();
});

async function fetchText(path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${test.server.url}${path}`);
  return { status: res.status, body: await res.text() };
}

async function scrape(): Promise<string> {
  const { status, body } = await fetchText("/metrics");
  expect(status).toBe(200);
  return body;
}

/** The value of the sample `name{labels}` (labels in the order prom-client writes them). */
function sample(text: string, name: string, labels = ""): number | undefined {
  const prefix = labels === "" ? `${name} ` : `${name}{${labels}} `;
  const line = text.split("\n").find((l) => l.startsWith(prefix));
  return line === undefined ? undefined : Number(line.slice(prefix.length));
}

describe("metrics of a running server", () => {
  it("exposes Node's process metrics under their usual names, without a prefix", async () => {
    const text = await scrape();
    for (const name of [
      "process_cpu_seconds_total",
      "process_resident_memory_bytes",
      "process_start_time_seconds",
      "nodejs_eventloop_lag_seconds",
      "nodejs_heap_size_used_bytes",
    ]) {
      expect(text).toMatch(new RegExp(`^${name} [\\d.e+-]+$`, "m"));
    }
    expect(text).not.toContain("leaf_process_");
    // Prometheus's advice: times in seconds, so the start time is near now in seconds.
    const start = sample(text, "process_start_time_seconds")!;
    expect(Math.abs(start - Date.now() / 1000)).toBeLessThan(3600);
  });

  it("counts and times HTTP requests by route pattern and status, never by raw URL", async () => {
    for (let i = 0; i < 7; i++)
      expect((await fetchText(`/api/segment/get/${TAG}`)).status).toBe(200);
    for (let i = 0; i < 3; i++) {
      expect((await fetchText(`/api/segment/get/no-such-tag-${i}`)).status).toBe(404);
    }
    expect((await fetchText("/no/such/path/12345")).status).toBe(404);
    const text = await scrape();
    const ok = 'method="GET",route="/api/segment/get/:key",status_code="200"';
    const missing = 'method="GET",route="/api/segment/get/:key",status_code="404"';
    expect(sample(text, "http_requests_total", ok)).toBe(7);
    expect(sample(text, "http_requests_total", missing)).toBe(3);
    expect(sample(text, "http_request_duration_seconds_count", ok)).toBe(7);
    expect(sample(text, "http_request_duration_seconds_bucket", `le="+Inf",${ok}`)).toBe(7);
    expect(sample(text, "http_request_duration_seconds_sum", ok)).toBeGreaterThan(0);
    expect(
      sample(text, "http_requests_total", 'method="GET",route="unmatched",status_code="404"'),
    ).toBe(1);
    // No label carries a raw URL: the tags and the unknown path appear nowhere in http_* series.
    const httpLines = text.split("\n").filter((l) => l.startsWith("http_"));
    expect(httpLines.length).toBeGreaterThan(0);
    for (const line of httpLines) {
      expect(line).not.toContain("no-such-tag");
      expect(line).not.toContain(TAG);
      expect(line).not.toContain("/no/such/path");
    }
    expect(sample(text, "leaf_request_errors_total", 'mode="segment",code="UNKNOWN_TAG"')).toBe(3);
  });

  it("counts segment ids per tag, range loads and their latency, and the time left at the current rate", async () => {
    const before = await scrape();
    const issuedBefore = sample(before, "leaf_ids_issued_total", `mode="segment",tag="${TAG}"`)!;
    const body = (await fetchText(`/api/segment/get/${TAG}?count=2500`)).body;
    expect(body.trimEnd().split("\n")).toHaveLength(2500);
    // The rate needs a sample or two of the once-a-second activity.
    let text = "";
    await expect
      .poll(
        async () => {
          text = await scrape();
          return sample(text, "leaf_segment_seconds_left", `tag="${TAG}"`);
        },
        { timeout: 10_000, interval: 200 },
      )
      .toBeGreaterThan(0);
    expect(sample(text, "leaf_ids_issued_total", `mode="segment",tag="${TAG}"`)).toBe(
      issuedBefore + 2500,
    );
    // 2,500 + the earlier 7 ids from ranges of 2,000: a second range was loaded, and a third.
    const loads = sample(text, "leaf_segment_loads_total", `tag="${TAG}",result="ok"`)!;
    expect(loads).toBeGreaterThanOrEqual(2);
    expect(sample(text, "leaf_segment_load_duration_seconds_count", `tag="${TAG}"`)).toBe(loads);
    const left = sample(text, "leaf_segment_ids_left", `tag="${TAG}"`)!;
    expect(left).toBeGreaterThan(0);
    // Seconds left = ids left / ids per second: both positive, and consistent with each other.
    const monitor = (await (await fetch(`${test.server.url}/api/v1/monitor`)).json()) as {
      capacity: { tags: Array<{ tag: string; idsPerSecond: number; bufferIdsLeft: string }> };
    };
    const cap = monitor.capacity.tags.find((t) => t.tag === TAG)!;
    expect(cap.idsPerSecond).toBeGreaterThan(0);
    expect(Number(cap.bufferIdsLeft)).toBe(left);
  });

  it("shows each tag's max_id and its headroom below 2^63 - 1", async () => {
    // The prefetch may still be taking ranges in the background (the earlier tests drew ids): read
    // until the store and the scrape agree, so that both describe the same max_id.
    let maxId = 0n;
    let text = "";
    for (let attempt = 0; attempt < 50; attempt++) {
      const rows = await test.server.services.segment!.store.describeTags();
      maxId = rows.find((r) => r.tag === TAG)!.maxId;
      text = await scrape();
      if (sample(text, "leaf_segment_max_id", `tag="${TAG}"`) === Number(maxId)) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(sample(text, "leaf_segment_max_id", `tag="${TAG}"`)).toBe(Number(maxId));
    expect(sample(text, "leaf_segment_max_id_headroom", `tag="${TAG}"`)).toBe(
      Number(MAX_ID - maxId),
    );
    const monitor = (await (await fetch(`${test.server.url}/api/v1/monitor`)).json()) as {
      capacity: { tags: Array<{ tag: string; maxId: string; headroom: string }> };
    };
    const cap = monitor.capacity.tags.find((t) => t.tag === TAG)!;
    // Exact in the JSON, as decimal strings.
    expect(cap.maxId).toBe(maxId.toString());
    expect(BigInt(cap.headroom)).toBe(MAX_ID - maxId);
    expect(sample(text, "leaf_segment_store_up", 'store="embedded"')).toBe(1);
  });

  it("counts snowflake ids and the waits of a used-up sequence, and shows the layout's end in seconds", async () => {
    const before = await scrape();
    const issuedBefore = sample(before, "leaf_ids_issued_total", 'mode="snowflake",tag=""')!;
    // 10,000 ids in one batch need at least three ticks of 4,096: at least two waits for a tick.
    const res = await fetchText("/api/snowflake/get/x?count=10000");
    const ids = res.body.trimEnd().split("\n").map(BigInt);
    expect(ids).toHaveLength(10_000);
    const usedUp = ids
      .slice(0, -1)
      .filter((id) => (id & BigInt(layouts.leaf.maxSequence)) === BigInt(layouts.leaf.maxSequence));
    expect(usedUp.length).toBeGreaterThanOrEqual(2);
    const text = await scrape();
    expect(sample(text, "leaf_ids_issued_total", 'mode="snowflake",tag=""')).toBe(
      issuedBefore + 10_000,
    );
    expect(sample(text, "leaf_snowflake_sequence_overflow_waits_total")).toBeGreaterThanOrEqual(
      usedUp.length,
    );
    expect(sample(text, "leaf_snowflake_layout_end_timestamp_seconds")).toBe(
      layouts.leaf.lastInstantMs / 1000,
    );
    const secondsLeft = sample(text, "leaf_snowflake_layout_seconds_left")!;
    expect(Math.abs(secondsLeft - (layouts.leaf.lastInstantMs - Date.now()) / 1000)).toBeLessThan(
      600,
    );
    const last = sample(text, "leaf_snowflake_last_timestamp_seconds")!;
    expect(Math.abs(last - Date.now() / 1000)).toBeLessThan(600);
    expect(sample(text, "leaf_snowflake_worker_ids")).toBe(1024);
    expect(sample(text, "leaf_snowflake_registry_up", 'registry="local"')).toBe(1);
    expect(text).toMatch(/^leaf_snowflake_clock_rollbacks_total/m);
    // The local registry's id is configured by hand: no "ids left" to count.
    expect(text).not.toMatch(/^leaf_snowflake_worker_ids_left\{/m);
    expect(text).toMatch(/^leaf_server_info\{version="[^"]+",config="[0-9a-f]{12}"\} 1$/m);
    // Each backend in use, as its entry describes it: the embedded store's folder, the local registry.
    expect(text).toMatch(
      /^leaf_backend_info\{role="segment-store",kind="embedded",mode="",target="[^"]+segments",shared="false"\} 1$/m,
    );
    expect(text).toMatch(
      /^leaf_backend_info\{role="registry",kind="local",mode="configured",target="[^"]+registry-local",shared="false"\} 1$/m,
    );
  });
});
