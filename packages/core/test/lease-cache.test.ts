import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  checkClockNotBehind,
  readLeaseCache,
  writeFileAtomic,
  writeLeaseCache,
} from "../src/adapter";
import { ErrorCodes } from "../src/index";

const dir = mkdtempSync(join(tmpdir(), "leaf-core-test-"));
const lease = {
  node: { name: "a", ip: "10.0.0.1", port: 8080 },
  workerId: 3,
  timestamp: 1_700_000_000_000,
  registry: "zk",
};

describe("lease cache file", () => {
  it("reads back what it wrote", () => {
    const path = join(dir, "nested", "worker.json");
    writeLeaseCache(path, lease);
    expect(readLeaseCache(path)).toEqual(lease);
  });

  it("answers undefined when there is no file", () => {
    expect(readLeaseCache(join(dir, "missing.json"))).toBeUndefined();
  });

  it("names the file and the problem when it is corrupt", () => {
    const path = join(dir, "bad.json");
    writeFileSync(path, "{not json");
    expect(() => readLeaseCache(path, "registry-zk")).toThrow(
      /\[registry-zk\] lease cache .*bad.json is not usable: not JSON/,
    );
    writeFileSync(path, JSON.stringify({ ...lease, workerId: -1 }));
    expect(() => readLeaseCache(path)).toThrow(/workerId -1/);
  });

  it("leaves no temp files behind", () => {
    const path = join(dir, "clean.json");
    for (let i = 0; i < 20; i++)
      writeLeaseCache(path, { ...lease, timestamp: lease.timestamp + i });
    expect(JSON.parse(readFileSync(path, "utf8")).timestamp).toBe(lease.timestamp + 19);
  });
});

describe("writeFileAtomic", () => {
  it("runs beforeReplace after writing the new content and before the rename; a throw leaves the file as it was", () => {
    const dir = mkdtempSync(join(tmpdir(), "leaf-atomic-"));
    const path = join(dir, "f");
    writeFileAtomic(path, "old");
    let seenTemp: string[] = [];
    expect(() =>
      writeFileAtomic(path, "new", () => {
        seenTemp = readdirSync(dir).filter((name) => name.endsWith(".tmp"));
        throw new Error("not ours any more");
      }),
    ).toThrow("not ours any more");
    // The new content was complete on disk in its temp file when the check ran.
    expect(seenTemp).toHaveLength(1);
    expect(readFileSync(path, "utf8")).toBe("old");
    expect(readdirSync(dir)).toEqual(["f"]);
    writeFileAtomic(path, "new", () => {});
    expect(readFileSync(path, "utf8")).toBe("new");
  });
});

describe("checkClockNotBehind", () => {
  const base = { component: "core", toleranceMs: 5, source: "test" };
  it("passes when the clock is ahead, and asks to wait within the tolerance", () => {
    expect(checkClockNotBehind({ ...base, lastTimestamp: 100, now: 200 })).toBe(0);
    expect(checkClockNotBehind({ ...base, lastTimestamp: 203, now: 200 })).toBe(3);
  });

  it("refuses past the tolerance with both times in the message", () => {
    expect(() =>
      checkClockNotBehind({ ...base, lastTimestamp: 1_000_000, now: 0, workerId: 4 }),
    ).toThrow(
      /clock \(1970-01-01T00:00:00.000Z, 0\) is 1000000 ms behind the last timestamp for worker id 4 in test \(1970-01-01T00:16:40.000Z, 1000000\)/,
    );
    expect(() => checkClockNotBehind({ ...base, lastTimestamp: 1_000, now: 0 })).toThrow(
      expect.objectContaining({ code: ErrorCodes.CLOCK_BEHIND_LEASE }),
    );
  });
});
