import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { get, startTestServer, type TestServer } from "./helpers";

const ADMIN = "admin-token-0123456789abcdef";
const HOSTILE_TAG = '<img src=x onerror="document.title=1">';
let test: TestServer;
let browser: BrowserContext;
let page: Page;
const profile = mkdtempSync(join(tmpdir(), "leaf-chromium-"));

beforeAll(async () => {
  test = await startTestServer({ server: { adminToken: ADMIN } });
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
      /last load \d\d:\d\d:\d\d\.\d{3} \([\d.]+ ms\) · 1 loads · 0 failures/,
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
    expect(await next.locator('[data-testid="range-state"]').textContent()).toBe("next ready");
    expect(await next.locator('[data-testid="range-numbers"]').textContent()).toMatch(
      /^value 2,001 · max [\d,]+ · step [\d,]+$/,
    );
    expect(
      await tagCard("leaf-segment-test").locator('[data-testid="tag-state"]').textContent(),
    ).toBe("next ready");
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
      .toMatch(/^\d\d:\d\d:\d\d\.\d{3}$/);
    expect(await page.locator('[data-testid="clock-offset"]').textContent()).toMatch(
      /^\+[\d,]+ ms$/,
    );
    expect(await page.locator("#snowflake-sub").textContent()).toContain("local registry");
    expect(await page.locator("#redis-body").textContent()).toContain("not configured");
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
