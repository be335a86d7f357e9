import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { layouts } from "@leaf/core";
import { type BrowserContext, chromium, type Locator, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { get, startTestServer, type TestServer } from "./helpers";

const ADMIN = "admin-token-0123456789abcdef";
const HOSTILE_TAG = '<img src=x onerror="document.title=1">';
let test: TestServer;
let browser: BrowserContext;
let page: Page;
const profile = mkdtempSync(join(tmpdir(), "leaf-chromium-"));

beforeAll(async () => {
  // The demo tag is loaded at start (lazy is the default): the page shows its ranges at once.
  test = await startTestServer({
    server: { adminToken: ADMIN },
    segment: { eagerTags: ["leaf-segment-test"] },
  });
  for (const tag of ["orders", HOSTILE_TAG]) {
    const res = await test.server.app.inject({
      method: "POST",
      url: "/api/v1/admin/tags",
      headers: { authorization: `Bearer ${ADMIN}` },
      payload: { tag, step: 1000 },
    });
    expect(res.statusCode).toBe(201);
  }
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  page = await browser.newPage();
  // A missing element fails within a poll's time rather than after playwright's 30 s.
  page.setDefaultTimeout(5000);
  await page.goto(`${test.server.url}/monitor`);
});

afterAll(async () => {
  await browser?.close();
  await test?.stop().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
});

const tagCard = (tag: string) =>
  page.locator(`[data-testid="tag"][data-tag="${tag.replace(/"/g, '\\"')}"]`);

describe("the monitor page in a browser", () => {
  it("shows the server ready, each tag with its two ranges as bars, and which one is current", async () => {
    await expect.poll(() => page.locator("#server-state").textContent()).toBe("ready");
    const card = tagCard("leaf-segment-test");
    await card.waitFor();
    expect(await card.locator('[data-testid="tag-name"]').textContent()).toBe("leaf-segment-test");
    // A tag nobody asked for yet has no range: it is loaded by its first request.
    expect(await tagCard(HOSTILE_TAG).locator('[data-testid="tag-state"]').textContent()).toBe(
      "loads on first request",
    );
    expect(await card.locator('[data-testid="range-0"]').textContent()).toContain("Segment 0");
    expect(await card.locator('[data-testid="range-1"]').textContent()).toContain("Segment 1");
    const states = await card.locator('[data-testid="range-state"]').allTextContents();
    expect(states.filter((s) => s === "current")).toHaveLength(1);
    // The current range is full: the demo row starts at 1 with a step of 2000.
    const current = card.locator('[data-testid="range-0"]');
    expect(await current.locator('[data-testid="range-numbers"]').textContent()).toBe(
      "value 1 · max 2,001 · step 2,000",
    );
    expect(await current.locator('[data-testid="bar"]').getAttribute("data-fill")).toBe("100.00");
    expect(await current.textContent()).toContain("2,000 left (100.0%)");
    expect(await card.locator('[data-testid="tag-foot"]').textContent()).toMatch(
      /last load \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \([\d.]+ ms\) · 1 loads · 0 failures/,
    );
  });

  it("follows ids being taken without a reload: the bar empties and the next range becomes ready", async () => {
    const ids = (await get(test.server, "/api/segment/get/leaf-segment-test?count=1500")).body
      .trimEnd()
      .split("\n");
    expect(ids.at(-1)).toBe("1500");
    const current = tagCard("leaf-segment-test").locator('[data-testid="range-0"]');
    await expect
      .poll(() => current.locator('[data-testid="range-numbers"]').textContent(), { timeout: 5000 })
      .toBe("value 1,501 · max 2,001 · step 2,000");
    expect(await current.locator('[data-testid="bar"]').getAttribute("data-fill")).toBe("25.00");
    const next = tagCard("leaf-segment-test").locator('[data-testid="range-1"]');
    // The preload starts when the current range passes its threshold: the page may show it
    // loading first (a loaded machine), then ready, without a reload.
    await expect
      .poll(() => next.locator('[data-testid="range-state"]').textContent(), { timeout: 10_000 })
      .toBe("next ready");
    expect(await next.locator('[data-testid="range-numbers"]').textContent()).toMatch(
      /^value 2,001 · max [\d,]+ · step [\d,]+$/,
    );
    await expect
      .poll(() => tagCard("leaf-segment-test").locator('[data-testid="tag-state"]').textContent(), {
        timeout: 10_000,
      })
      .toBe("next ready");
  });

  it("shows the store's rows, the snowflake worker id, lease state, last timestamp and clock offset", async () => {
    await get(test.server, "/api/snowflake/get/x");
    await expect
      .poll(() => page.locator('[data-testid="store-row"]').count(), { timeout: 8000 })
      .toBe(3);
    expect(await page.locator('[data-testid="worker-id"]').textContent()).toBe("0");
    expect(await page.locator('[data-testid="lease-state"]').textContent()).toBe("held");
    await expect
      .poll(() => page.locator('[data-testid="last-timestamp"]').textContent())
      .toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$/);
    expect(await page.locator('[data-testid="clock-offset"]').textContent()).toMatch(
      /^\+[\d,]+ ms$/,
    );
    expect(await page.locator("#snowflake-sub").textContent()).toContain("local registry");
    expect(await page.locator("#redis-body").textContent()).toContain("not configured");
  });

  it("shows motion under load: rates and sparklines per mode and tag, recent errors, capacity and connections", async () => {
    const base = test.server.url;
    let stop = false;
    let unknown = 0;
    let served = 0;
    const worker = async (i: number) => {
      while (!stop) {
        const path =
          i % 4 === 3
            ? "/api/snowflake/get/x"
            : i % 4 === 2 && unknown < 12
              ? `/api/segment/get/no-such-tag-${unknown++}`
              : "/api/segment/get/orders";
        const res = await fetch(base + path).catch(() => undefined);
        if (res === undefined) break;
        await res.text();
        if (res.status === 200) served++;
      }
    };
    const load = Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(worker));
    try {
      const segmentTile = page.locator('[data-testid="mode-activity"][data-mode="segment"]');
      const snowflakeTile = page.locator('[data-testid="mode-activity"][data-mode="snowflake"]');
      const rateIn = async (locator: Locator, unit: string) => {
        const text = (await locator.textContent()) ?? "";
        expect(text).toMatch(new RegExp(`^[\\d,.]+ ${unit}$`));
        return Number(text.split(" ")[0]!.replace(/,/g, ""));
      };
      // Rates of the last ten seconds, from the load running now.
      await expect
        .poll(() => rateIn(segmentTile.locator('[data-testid="requests-rate"]'), "requests/s"), {
          timeout: 15_000,
        })
        .toBeGreaterThan(1);
      await expect
        .poll(() => rateIn(segmentTile.locator('[data-testid="ids-rate"]'), "ids/s"))
        .toBeGreaterThan(1);
      await expect
        .poll(() => rateIn(snowflakeTile.locator('[data-testid="ids-rate"]'), "ids/s"))
        .toBeGreaterThan(1);
      await expect
        .poll(() => rateIn(snowflakeTile.locator('[data-testid="requests-rate"]'), "requests/s"))
        .toBeGreaterThan(1);
      // The sparklines have drawn something: the lines' highest second is above zero.
      for (const cls of ["ids", "req"]) {
        expect(
          Number(await segmentTile.locator(`polyline.${cls}`).getAttribute("data-max")),
        ).toBeGreaterThan(0);
      }
      const orders = tagCard("orders");
      const ordersRate = orders.locator('[data-testid="tag-rate"]');
      await expect
        .poll(() => ordersRate.textContent())
        .toMatch(
          /^[\d,.]+ ids\/s · [\d,.]+ requests\/s · both ranges last \d.* at the last minute's rate$/,
        );
      const [ids, requests] = ((await ordersRate.textContent()) ?? "")
        .split(" · ")
        .map((part) => Number(part.split(" ")[0]!.replace(/,/g, "")));
      expect(ids).toBeGreaterThan(0);
      expect(requests).toBeGreaterThan(0);
      expect(Number(await orders.locator("polyline.ids").getAttribute("data-max"))).toBeGreaterThan(
        0,
      );
    } finally {
      stop = true;
      await load;
    }
    expect(served).toBeGreaterThan(0);
    expect(unknown).toBe(12);
    // Errors by code over the last minutes: exactly the twelve unknown tags.
    const row = page.locator('[data-testid="error-row"][data-code="UNKNOWN_TAG"]');
    await expect.poll(() => row.locator('[data-testid="error-count"]').textContent()).toBe("12");
    expect(await row.textContent()).toContain("Segment");
    // Capacity: the layout's end, worker ids, each tag's headroom; no warnings on this server.
    const end = new Date(layouts.leaf.lastInstantMs).toISOString().slice(0, 10);
    expect(await page.locator('[data-testid="layout-end"]').textContent()).toBe(end);
    expect(await page.locator('[data-testid="worker-ids-left"]').textContent()).toBe("set by hand");
    expect(await page.locator('[data-testid="capacity-warning"]').count()).toBe(0);
    await expect
      .poll(() =>
        page
          .locator('[data-testid="headroom-row"][data-tag="orders"] [data-testid="headroom-time"]')
          .textContent(),
      )
      .toMatch(/^[\d,.]+ years$/);
    // Connections, snowflake motion, the configuration's source and fingerprint.
    expect(await page.locator('[data-testid="registry-state"]').textContent()).toBe("connected");
    expect(await page.locator('[data-testid="store-health"]').textContent()).toBe("database up");
    expect(await page.locator('[data-testid="overflow-waits"]').textContent()).toMatch(/^[\d,]+$/);
    expect(await page.locator('[data-testid="rollbacks"]').textContent()).toBe("0");
    expect(await page.locator('[data-testid="config"]').textContent()).toMatch(
      /^config options · #[0-9a-f]{12}$/,
    );
    expect(await page.locator("#updated").textContent()).toMatch(
      /^updated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC$/,
    );
    const shot = join(tmpdir(), "leaf-monitor-under-load.png");
    await page.screenshot({ path: shot, fullPage: true });
    expect(statSync(shot).size).toBeGreaterThan(10_000);
  });

  it("shows a hostile tag name as text, never as markup", async () => {
    const card = tagCard(HOSTILE_TAG);
    await card.waitFor();
    expect(await card.locator('[data-testid="tag-name"]').textContent()).toBe(HOSTILE_TAG);
    expect(await page.locator("img").count()).toBe(0);
    expect(await page.title()).toBe("Leaf monitor");
  });

  it("says so when the server stops answering", async () => {
    await test.stop();
    await expect
      .poll(() => page.locator("#banner").textContent(), { timeout: 8000 })
      .toContain("Server unreachable");
    expect(await page.locator("#banner").isVisible()).toBe(true);
    expect(await page.locator("#server-state").textContent()).toBe("unreachable");
  });
});
