// A graceful stop gives the ids a node holds and never handed out back to the store, so the next
// start continues right after the last id handed out (segment.giveBackOnClose); with it off, a
// restart skips the rest of the ranges the node held, as Java Leaf does.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig, startServer } from "../src/index";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const TAG = "leaf-segment-test";

/** Starts a server on `dir`, takes `count` ids one by one, stops it gracefully; returns the ids. */
async function run(dir: string, count: number, giveBackOnClose: boolean): Promise<bigint[]> {
  const config = loadConfig({
    values: {
      server: { host: "127.0.0.1", port: 0, drainMs: 0 },
      dataDir: dir,
      snowflake: { enabled: false },
      segment: { giveBackOnClose },
    },
    env: {},
  });
  const server = await startServer(config, { logger: false });
  const ids: bigint[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const res = await server.app.inject({ method: "GET", url: `/api/segment/get/${TAG}` });
      expect(res.statusCode).toBe(200);
      ids.push(BigInt(res.body));
    }
  } finally {
    await server.close();
  }
  return ids;
}

describe("give-back on a graceful stop", () => {
  it("continues after the last id handed out, restart after restart", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-give-back-"));
    dirs.push(dir);
    const all: bigint[] = [];
    for (let restart = 0; restart < 3; restart++) all.push(...(await run(dir, 5, true)));
    // Consecutive across the three processes: no id skipped, none repeated.
    expect(all).toEqual(all.map((_, i) => all[0]! + BigInt(i)));
  });

  it("skips the rest of the ranges held when it is off, as Java Leaf does", async () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-give-back-off-"));
    dirs.push(dir);
    const first = await run(dir, 5, false);
    const [next] = await run(dir, 1, false);
    expect(next! > first[4]! + 1n).toBe(true);
  });
});
