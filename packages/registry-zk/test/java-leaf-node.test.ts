// A Java Leaf node on the same host and ZooKeeper tree as this registry's normal mode, seen by
// running Java: fixtures/JavaLeafNode.java does with the cache folder and a forever node's path
// what SnowflakeZookeeperHolder (Meituan's leaf-core) does, with the same JDK calls.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { ErrorCodes } from "@leaf/core";
import { afterAll, describe, expect, it } from "vitest";
import { nodeOf, uniqueName, zkFixture } from "./helpers";

const fx = zkFixture();
const JAVA_LEAF_NODE = fileURLToPath(new URL("./fixtures/JavaLeafNode.java", import.meta.url));
const folders: string[] = [];
afterAll(() => {
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/**
 * Runs the Java Leaf stand-in (JDK 11+ source-file mode) with `tmp` as java.io.tmpdir; its output
 * lines. Asynchronous: a blocked event loop would cost the ZooKeeper sessions their pings.
 */
async function javaLeaf(tmp: string, ...args: string[]): Promise<string[]> {
  const { stdout } = await promisify(execFile)(
    "java",
    [`-Djava.io.tmpdir=${tmp}`, JAVA_LEAF_NODE, ...args],
    { encoding: "utf8" },
  );
  return stdout.trim().split("\n");
}

describe("a Java Leaf node started later on this host and tree", () => {
  it("finds its cache folder free: writes workerID.properties and can start from it without ZooKeeper", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "leaf-zk-java-node-"));
    folders.push(tmp);
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = tmp;
    try {
      // This registry's defaults, under a TMPDIR of the test's own.
      const node = nodeOf(uniqueName("rollback"), 0);
      const lease = await fx
        .registry({ cacheFile: undefined })
        .acquire({ node, maxWorkerId: 1023 });
      await lease.report(Date.now());
      await lease.release();

      // The rollback: Java Leaf on the same port, ZooKeeper reachable, then a start without it.
      const seen = await javaLeaf(tmp, "folder", node.name, "8080", String(lease.workerId));
      expect(seen).toEqual(["written", `fallback workerID=${lease.workerId}`]);
      // This registry's own cache stays beside Java Leaf's folder.
      expect(existsSync(join(tmp, node.name, "registry-zk", "8080", "workerID.json"))).toBe(true);
      expect(readdirSync(join(tmp, node.name, "leafconf", "8080"))).toEqual([
        "workerID.properties",
      ]);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
  });

  it("reads its worker id from the node path this registry created", async () => {
    const node = nodeOf(uniqueName("parse"), 3);
    const lease = await fx.registry().acquire({ node, maxWorkerId: 1023 });
    const [child] = await fx.admin.children(`/snowflake/${node.name}/forever`);
    const seen = await javaLeaf(tmpdir(), "parse", `/snowflake/${node.name}/forever/${child}`);
    expect(seen).toEqual([`workerID=${lease.workerId}`]);
    await lease.release();
  });

  it("refuses a leaf name with '-' in normal mode, where Java Leaf's parse of the path fails", async () => {
    const name = `order-${uniqueName("svc")}`;
    const path = `/snowflake/${name}/forever/10.1.0.1:8080-0000000000`;
    expect(await javaLeaf(tmpdir(), "parse", path)).toEqual([
      "error java.lang.NumberFormatException",
    ]);

    const refused = fx.registry().acquire({ node: nodeOf(name, 0), maxWorkerId: 1023 });
    await expect(refused).rejects.toMatchObject({
      code: ErrorCodes.INVALID_CONFIG,
      details: { key: "node.name", value: name },
      message: expect.stringContaining("NumberFormatException"),
    });
    // Nothing was written to the tree.
    expect(await fx.admin.exists(`/snowflake/${name}`)).toBe(false);
    // Recycle mode's tree is its own (Java Leaf never reads it): the name is accepted there.
    const recycled = await fx
      .registry({ mode: "recycle" })
      .acquire({ node: nodeOf(name, 0), maxWorkerId: 1023 });
    await recycled.release();
  });
});
