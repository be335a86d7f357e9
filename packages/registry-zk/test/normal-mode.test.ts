// Normal mode against a real ZooKeeper: Java Leaf's tree and data, migration from Java Leaf, the
// start-up checks (stored timestamp, peers' clocks, cache file), exhaustion, a second process on
// the same ip:port, chroot, digest auth and ACLs.
import { join } from "node:path";
import { ErrorCodes, isLeafError, ManualClock } from "@leaf/core";
import { writeLeaseCache } from "@leaf/core/adapter";
import { freePort } from "@leaf/testkit";
import zookeeper from "node-zookeeper-client";
import { describe, expect, it } from "vitest";
import { digestAclId } from "../src/index";
import { Admin, cacheDir, nodeOf, uniqueName, zkFixture } from "./helpers";

const fx = zkFixture();
const registry = fx.registry;

const javaData = (ip: string, port: number, timestamp: number) =>
  JSON.stringify({ ip, port: String(port), timestamp });

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

describe("normal mode: Java Leaf's tree", () => {
  it("creates exactly Java Leaf's persistent sequential node and data for a new ip:port", async () => {
    const name = uniqueName("tree");
    const before = Date.now();
    const lease = await registry().acquire({ node: nodeOf(name, 0), maxWorkerId: 1023 });
    expect(lease.workerId).toBe(0);
    expect(lease.lastTimestamp).toBe(0);
    const children = await fx.admin.children(`/snowflake/${name}/forever`);
    expect(children).toEqual(["10.1.0.1:8080-0000000000"]);
    const { data, stat } = await fx.admin.getData(`/snowflake/${name}/forever/${children[0]}`);
    expect(Object.keys(JSON.parse(data))).toEqual(["ip", "port", "timestamp"]);
    expect(JSON.parse(data)).toMatchObject({ ip: "10.1.0.1", port: "8080" });
    expect(JSON.parse(data).timestamp).toBeGreaterThanOrEqual(before);
    // Persistent: no ephemeral owner.
    expect(stat.ephemeralOwner.equals(Buffer.alloc(8))).toBe(true);
    await lease.report(Date.now());
    const reported = JSON.parse(
      (await fx.admin.getData(`/snowflake/${name}/forever/${children[0]}`)).data,
    );
    expect(Object.keys(reported)).toEqual(["ip", "port", "timestamp"]);
    await lease.release();
  });

  it("keeps the worker ids of a tree Java Leaf wrote (migration)", async () => {
    const name = uniqueName("java");
    const forever = `/snowflake/${name}/forever`;
    // As Java Leaf's Curator does: parents created empty, one sequential node per ip:port.
    await fx.admin.mkdirp(forever);
    const lastWeek = Date.now() - 7 * 24 * 3600 * 1000;
    const javaNodes = ["10.2.0.1", "10.2.0.2", "10.2.0.3", "10.2.0.4"];
    for (const ip of javaNodes) {
      await fx.admin.create(
        `${forever}/${ip}:8080-`,
        javaData(ip, 8080, lastWeek),
        zookeeper.CreateMode.PERSISTENT_SEQUENTIAL,
      );
    }
    // The third Java node is replaced by this server: same ip:port, same worker id.
    const lease = await registry().acquire({
      node: { name, ip: "10.2.0.3", port: 8080 },
      maxWorkerId: 1023,
    });
    expect(lease.workerId).toBe(2);
    expect(lease.lastTimestamp).toBe(lastWeek);
    const now = Date.now();
    await lease.report(now);
    expect(
      JSON.parse((await fx.admin.getData(`${forever}/10.2.0.3:8080-0000000002`)).data),
    ).toEqual({
      ip: "10.2.0.3",
      port: "8080",
      timestamp: now,
    });
    // A node Java Leaf never saw continues Java Leaf's sequence.
    const fresh = await registry().acquire({
      node: { name, ip: "10.2.0.9", port: 8080 },
      maxWorkerId: 1023,
    });
    expect(fresh.workerId).toBe(4);
    expect(await fx.admin.children(forever)).toContain("10.2.0.9:8080-0000000004");
    await lease.release();
    await fresh.release();
  });

  it("never moves the stored timestamp backwards, even when another writer raised it", async () => {
    const name = uniqueName("backwards");
    const node = nodeOf(name, 0);
    const lease = await registry().acquire({ node, maxWorkerId: 1023 });
    const path = `/snowflake/${name}/forever/10.1.0.1:8080-0000000000`;
    const high = Date.now();
    await lease.report(high);
    await lease.report(high - 10_000);
    expect(JSON.parse((await fx.admin.getData(path)).data).timestamp).toBe(high);
    // Java Leaf on the same ip:port (a mistake, but it happens during a migration) writes later.
    await fx.admin.setData(path, javaData(node.ip, node.port, high + 5_000));
    await lease.report(high + 1);
    expect(JSON.parse((await fx.admin.getData(path)).data).timestamp).toBe(high + 5_000);
    await lease.release();
  });
});

describe("normal mode: start-up checks", () => {
  it("refuses to start when the stored timestamp is ahead of the clock", async () => {
    const name = uniqueName("ahead");
    const node = nodeOf(name, 0);
    const first = await registry().acquire({ node, maxWorkerId: 1023 });
    const stored = Date.now();
    await first.release(stored);
    const clock = new ManualClock(stored - 60_000);
    const error = await rejection(registry({ clock }).acquire({ node, maxWorkerId: 1023 }));
    expect(isLeafError(error, ErrorCodes.CLOCK_BEHIND_LEASE)).toBe(true);
    expect((error as Error).message).toContain(new Date(stored).toISOString());
    expect((error as Error).message).toContain(new Date(stored - 60_000).toISOString());
    // The live marker is not left behind.
    expect(await fx.admin.exists(`/snowflake/${name}/temporary/10.1.0.1:8080`)).toBe(false);
  });

  it("refuses a node whose clock is far from the live peers' clocks, before it takes an id", async () => {
    const name = uniqueName("skew");
    const peers = [];
    for (let i = 0; i < 3; i++) {
      const lease = await registry().acquire({ node: nodeOf(name, i), maxWorkerId: 1023 });
      await lease.report(Date.now());
      peers.push(lease);
    }
    const clock = new ManualClock(Date.now() + 60_000);
    const error = await rejection(
      registry({ clock, peerClockCheck: { maxSkewMs: 5_000 } }).acquire({
        node: nodeOf(name, 9),
        maxWorkerId: 1023,
      }),
    );
    expect(isLeafError(error, ErrorCodes.CLOCK_SKEW)).toBe(true);
    expect((error as Error).message).toMatch(
      /more than 5000 ms off 3 of 3 live peer\(s\): (59|60)\d{3} ms ahead of /,
    );
    expect((error as Error).message).toContain("peerClockCheck.maxSkewMs");
    // No forever node was spent on it, and no marker is left.
    expect(await fx.admin.children(`/snowflake/${name}/forever`)).toHaveLength(3);
    expect(await fx.admin.exists(`/snowflake/${name}/temporary/10.1.0.10:8080`)).toBe(false);

    // Within the threshold it starts.
    const close = new ManualClock(Date.now() + 2_000);
    const ok = await registry({ clock: close }).acquire({
      node: nodeOf(name, 9),
      maxWorkerId: 1023,
    });
    expect(ok.workerId).toBe(3);
    await ok.release();

    // Peers that are gone do not count: released nodes leave no live marker.
    for (const lease of peers) await lease.release();
    const alone = await registry({ clock }).acquire({ node: nodeOf(name, 10), maxWorkerId: 1023 });
    expect(alone.workerId).toBe(4);
    await alone.release();
  });

  it("starts from the cache file when ZooKeeper is unreachable, only when its timestamp check passes", async () => {
    const unreachable = `127.0.0.1:${await freePort()}`;
    const dir = cacheDir();
    const name = uniqueName("cache");
    const node = nodeOf(name, 0);
    const cacheFile = join(dir, "workerID.json");
    const stored = Date.now() - 1_000;
    writeLeaseCache(cacheFile, { node, workerId: 7, timestamp: stored, registry: "zk" });
    const offline = (clock?: ManualClock) =>
      registry({
        url: unreachable,
        connectTimeoutMs: 300,
        cacheFile,
        ...(clock ? { clock } : {}),
      });

    const lease = await offline().acquire({ node, maxWorkerId: 1023 });
    expect(lease.workerId).toBe(7);
    expect(lease.lastTimestamp).toBe(stored);
    await lease.release(stored + 500);

    // The clock went back behind the cached timestamp (Java Leaf #97): refused.
    const behind = await rejection(
      offline(new ManualClock(stored - 3_600_000)).acquire({ node, maxWorkerId: 1023 }),
    );
    expect(isLeafError(behind, ErrorCodes.CLOCK_BEHIND_LEASE)).toBe(true);
    expect((behind as Error).message).toContain(cacheFile);

    // Another node's cache is not used.
    const other = await rejection(offline().acquire({ node: nodeOf(name, 1), maxWorkerId: 1023 }));
    expect(isLeafError(other, ErrorCodes.UNAVAILABLE)).toBe(true);
    expect((other as Error).message).toContain("not to");

    // No cache at all: UNAVAILABLE naming the missing file.
    const none = await rejection(
      registry({
        url: unreachable,
        connectTimeoutMs: 300,
        cacheFile: join(dir, "missing.json"),
      }).acquire({ node, maxWorkerId: 1023 }),
    );
    expect(isLeafError(none, ErrorCodes.UNAVAILABLE)).toBe(true);
    expect((none as Error).message).toContain("missing.json");
  });

  it("fails with a clear error naming the way out when the ids pass the layout's range", async () => {
    const name = uniqueName("full");
    const r = registry();
    await r.acquire({ node: nodeOf(name, 0), maxWorkerId: 1 });
    await r.acquire({ node: nodeOf(name, 1), maxWorkerId: 1 });
    const error = await rejection(r.acquire({ node: nodeOf(name, 2), maxWorkerId: 1 }));
    expect(isLeafError(error, ErrorCodes.WORKER_IDS_EXHAUSTED)).toBe(true);
    expect((error as Error).message).toMatch(/worker id 2, but the layout holds 0\.\.1/);
    expect((error as Error).message).toMatch(/new leaf name/);
    expect((error as Error).message).toMatch(/mode "recycle"/);
    // It refused before creating a node that could never be used.
    expect(await fx.admin.children(`/snowflake/${name}/forever`)).toHaveLength(2);
  });
});

describe("normal mode: one process per ip:port", () => {
  it("refuses a second live process on the same ip:port, then hands it the id once the first is gone", async () => {
    const name = uniqueName("twice");
    const node = nodeOf(name, 0);
    const first = await registry().acquire({ node, maxWorkerId: 1023 });
    const error = await rejection(
      registry({ inUseWaitMs: 300 }).acquire({ node, maxWorkerId: 1023 }),
    );
    expect(isLeafError(error, ErrorCodes.WORKER_ID_IN_USE)).toBe(true);
    expect((error as Error).message).toContain(`pid ${process.pid}`);

    // A restarting node waits for the previous process's marker to go.
    const waiting = registry({ inUseWaitMs: 10_000 }).acquire({ node, maxWorkerId: 1023 });
    setTimeout(() => void first.release(), 300);
    const second = await waiting;
    expect(second.workerId).toBe(first.workerId);
    await second.release();
  });

  it("refuses a leaf name that recycle mode uses", async () => {
    const name = uniqueName("mixed");
    const recycled = await registry({ mode: "recycle" }).acquire({
      node: nodeOf(name, 0),
      maxWorkerId: 1023,
    });
    const error = await rejection(registry().acquire({ node: nodeOf(name, 1), maxWorkerId: 1023 }));
    expect(isLeafError(error, ErrorCodes.INVALID_CONFIG)).toBe(true);
    expect((error as Error).message).toMatch(/used in recycle mode/);
    await recycled.release();
  });
});

describe("normal mode: connection settings", () => {
  it("works under a chroot it creates", async () => {
    const chroot = `/${uniqueName("chroot")}/leaf`;
    const name = uniqueName("rooted");
    const lease = await registry({ url: `${fx.zk.connectString}${chroot}` }).acquire({
      node: nodeOf(name, 0),
      maxWorkerId: 1023,
    });
    expect(await fx.admin.children(`${chroot}/snowflake/${name}/forever`)).toEqual([
      "10.1.0.1:8080-0000000000",
    ]);
    expect(await fx.admin.exists(`/snowflake/${name}`)).toBe(false);
    await lease.release();
  });

  it("authenticates with digest credentials and puts its ACL on every node it creates", async () => {
    const name = uniqueName("acl");
    const auth = { username: "leaf", password: "s3cret" };
    const lease = await registry({ auth, acl: "creator-read" }).acquire({
      node: nodeOf(name, 0),
      maxWorkerId: 1023,
    });
    const path = `/snowflake/${name}/forever/10.1.0.1:8080-0000000000`;
    // ZooKeeper shows digest ids only to a client with ADMIN rights: read them as the creator.
    const owner = await Admin.connect(fx.zk.connectString, "leaf:s3cret");
    const acls = await owner.getACL(path).finally(() => owner.close());
    const permission = (acl: zookeeper.ACL) =>
      (acl as unknown as { permission: number }).permission;
    expect(acls.map((a) => `${a.id.scheme}:${a.id.id}:${permission(a)}`).sort()).toEqual(
      [
        `digest:${digestAclId("leaf", "s3cret")}:${zookeeper.Permission.ALL}`,
        `world:anyone:${zookeeper.Permission.READ}`,
      ].sort(),
    );
    // Anyone may read; nobody else may write.
    expect(JSON.parse((await fx.admin.getData(path)).data).ip).toBe("10.1.0.1");
    await expect(fx.admin.setData(path, "{}")).rejects.toMatchObject({ name: "NO_AUTH" });
    const stranger = await rejection(
      registry().acquire({ node: nodeOf(name, 1), maxWorkerId: 1023 }),
    );
    expect(isLeafError(stranger, ErrorCodes.INVALID_CONFIG)).toBe(true);
    expect((stranger as Error).message).toMatch(/NO_AUTH.*auth and acl options/);
    // The same credentials in another process work.
    const friend = await registry({ auth }).acquire({ node: nodeOf(name, 1), maxWorkerId: 1023 });
    expect(friend.workerId).toBe(1);
    await friend.release();
    await lease.release();
  });
});

describe("the ZooKeeper client", () => {
  it("turns an error code newer than node-zookeeper-client knows into a failed request, not a crash", async () => {
    const name = uniqueName("codes");
    const lease = await registry().acquire({ node: nodeOf(name, 0), maxWorkerId: 1023 });
    try {
      // -127 (throttled) and -118 (session moved) come from ZooKeeper 3.5+; the client knows up to
      // -115.
      for (const code of [-118, -127]) {
        const error = (
          zookeeper.Exception as unknown as { create(code: number): { getCode(): number } }
        ).create(code);
        expect(error.getCode()).toBe(code);
        expect(error).toBeInstanceOf(Error);
      }
      const known = (
        zookeeper.Exception as unknown as { create(code: number): { getCode(): number } }
      ).create(zookeeper.Exception.NO_NODE);
      expect(known.getCode()).toBe(-101);
    } finally {
      await lease.release();
    }
  });
});
