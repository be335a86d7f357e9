// Recycle mode against a real ZooKeeper: the tree and its data, which free id is taken, reuse after
// the holder is gone with its highest timestamp, running out, the peer clock check, and a leaf
// name used by another mode. Session expiry and killed holders are in faults.test.ts.
import { ErrorCodes, isLeafError, ManualClock } from "@leaf/core";
import zookeeper from "node-zookeeper-client";
import { describe, expect, it } from "vitest";
import { ZookeeperRegistry } from "../src/index";
import { nodeOf, testOptions, uniqueName, zkFixture } from "./helpers";

const fx = zkFixture({ mode: "recycle" });
const registry = fx.registry;

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

describe("recycle mode", () => {
  it("holds an id with an ephemeral lease node and keeps a persistent record of its timestamp", async () => {
    const name = uniqueName("tree");
    const lease = await registry().acquire({ node: nodeOf(name, 0), maxWorkerId: 1023 });
    expect(lease.workerId).toBe(0);
    const leasePath = `/snowflake/${name}/recycle/leases/0`;
    const recordPath = `/snowflake/${name}/recycle/workers/0`;
    const held = await fx.admin.getData(leasePath);
    expect(held.stat.ephemeralOwner.equals(Buffer.alloc(8))).toBe(false);
    expect(JSON.parse(held.data)).toMatchObject({ ip: "10.1.0.1", port: "8080", pid: process.pid });
    const reported = Date.now();
    await lease.report(reported);
    const record = await fx.admin.getData(recordPath);
    expect(record.stat.ephemeralOwner.equals(Buffer.alloc(8))).toBe(true);
    const written = JSON.parse(record.data);
    expect(written).toMatchObject({
      workerId: 0,
      timestamp: reported,
      ip: "10.1.0.1",
      port: "8080",
    });
    // The horizon: the writer's clock when it sent the write + silenceLimitMs (2/3 of 3 s).
    expect(written.at).toBeGreaterThanOrEqual(reported);
    expect(written.horizon).toBe(written.at + 2000);
    expect(lease.horizon).toBe(written.horizon);
    await lease.release(reported + 1);
    // Released: the id is free at once, the record keeps the final timestamp, and no horizon.
    expect(await fx.admin.exists(leasePath)).toBe(false);
    expect(JSON.parse((await fx.admin.getData(recordPath)).data)).toMatchObject({
      timestamp: reported + 1,
      horizon: 0,
    });
  });

  it("reuses an id once its holder is gone, issuing only after the highest timestamp reported under it", async () => {
    const name = uniqueName("reuse");
    const a = await registry().acquire({ node: nodeOf(name, 0), maxWorkerId: 1 });
    const b = await registry().acquire({ node: nodeOf(name, 1), maxWorkerId: 1 });
    expect([a.workerId, b.workerId]).toEqual([0, 1]);
    const full = await rejection(registry().acquire({ node: nodeOf(name, 2), maxWorkerId: 1 }));
    expect(isLeafError(full, ErrorCodes.WORKER_IDS_EXHAUSTED)).toBe(true);
    expect((full as Error).message).toMatch(/2 of the 2 ids 0\.\.1 are leased/);
    expect((full as Error).message).toMatch(/more worker bits/);

    const last = Date.now();
    await a.report(last - 100);
    await a.release(last);
    // A container with a new ip:port takes the id, and starts after A's last timestamp.
    const c = await registry().acquire({ node: nodeOf(name, 2), maxWorkerId: 1 });
    expect(c.workerId).toBe(0);
    expect(c.lastTimestamp).toBe(last);
    await b.release();
    await c.release();
  });

  it("prefers never-used ids, and gives a restarting node the id it held last", async () => {
    const name = uniqueName("order");
    const first = await registry().acquire({ node: nodeOf(name, 0), maxWorkerId: 1023 });
    await first.release(Date.now());
    // Another node does not get the id just freed while unused ids remain.
    const other = await registry().acquire({ node: nodeOf(name, 1), maxWorkerId: 1023 });
    expect(other.workerId).toBe(1);
    // The restarting node gets its own id back.
    const again = await registry().acquire({ node: nodeOf(name, 0), maxWorkerId: 1023 });
    expect(again.workerId).toBe(0);
    await other.release();
    await again.release();
  });

  it("leases backups in the same session and frees them all on release", async () => {
    const name = uniqueName("backups");
    const lease = await registry().acquire({
      node: nodeOf(name, 0),
      maxWorkerId: 1023,
      backups: 2,
    });
    expect([lease.workerId, ...lease.backups.map((b) => b.workerId)]).toEqual([0, 1, 2]);
    const owners = await Promise.all(
      [0, 1, 2].map(
        async (id) => (await fx.admin.getData(`/snowflake/${name}/recycle/leases/${id}`)).stat,
      ),
    );
    expect(new Set(owners.map((s) => s.ephemeralOwner.toString("hex"))).size).toBe(1);
    const now = Date.now();
    await lease.report(now, [
      { workerId: 1, lastTimestamp: now - 10 },
      { workerId: 2, lastTimestamp: now - 20 },
    ]);
    expect(
      JSON.parse((await fx.admin.getData(`/snowflake/${name}/recycle/workers/2`)).data).timestamp,
    ).toBe(now - 20);
    await lease.release(now);
    expect(await fx.admin.children(`/snowflake/${name}/recycle/leases`)).toEqual([]);
  });

  it("refuses a node whose clock is far from the live holders' clocks, and frees what it took", async () => {
    const name = uniqueName("skew");
    const peers = [];
    for (let i = 0; i < 2; i++) {
      const lease = await registry().acquire({ node: nodeOf(name, i), maxWorkerId: 1023 });
      await lease.report(Date.now());
      peers.push(lease);
    }
    const clock = new ManualClock(Date.now() - 120_000);
    const error = await rejection(
      registry({ clock }).acquire({ node: nodeOf(name, 5), maxWorkerId: 1023 }),
    );
    expect(isLeafError(error, ErrorCodes.CLOCK_SKEW)).toBe(true);
    expect((error as Error).message).toMatch(
      /more than 5000 ms off 2 of 2 live peer\(s\): 1(19|20)\d{3} ms behind worker/,
    );
    expect((await fx.admin.children(`/snowflake/${name}/recycle/leases`)).sort()).toEqual([
      "0",
      "1",
    ]);
    for (const lease of peers) await lease.release();
  });

  it("lets a right clock take a lease beside a live peer an hour ahead, and refuses that peer's clock", async () => {
    // The nemesis's 60-minute run of 28 Nov (seed 2816): A's clock stepped an hour ahead, then
    // ZooKeeper killed; against the peers' average, C's re-acquire was refused for 36 s.
    const name = uniqueName("outlier");
    const ahead = new ManualClock(Date.now());
    const a = await registry({ clock: ahead }).acquire({
      node: nodeOf(name, 0),
      maxWorkerId: 1023,
    });
    const b = await registry().acquire({ node: nodeOf(name, 1), maxWorkerId: 1023 });
    await b.report(Date.now());
    ahead.set(Date.now() + 3_600_000);
    await a.report(ahead.now());
    const c = await registry().acquire({ node: nodeOf(name, 2), maxWorkerId: 1023 });
    expect(c.workerId).toBe(2);
    await c.report(Date.now());
    const error = await rejection(
      registry({ clock: new ManualClock(Date.now() + 3_600_000) }).acquire({
        node: nodeOf(name, 3),
        maxWorkerId: 1023,
      }),
    );
    expect(isLeafError(error, ErrorCodes.CLOCK_SKEW)).toBe(true);
    expect((error as Error).message).toMatch(/more than 5000 ms off 2 of 3 live peer\(s\)/);
    for (const lease of [a, b, c]) await lease.release();
  });

  it("does not take a holder that has not reported yet for a peer with a wrong clock", async () => {
    const name = uniqueName("quiet");
    const options = { peerClockCheck: { maxSkewMs: 5_000, liveWindowMs: 1_000 } };
    // Id 0 was last used an hour ago.
    const old = await registry(options).acquire({ node: nodeOf(name, 0), maxWorkerId: 0 });
    await old.release(Date.now() - 3_600_000);
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    const quiet = await registry(options).acquire({ node: nodeOf(name, 1), maxWorkerId: 0 });
    expect(quiet.lastTimestamp).toBeLessThan(Date.now() - 3_000_000);
    // The record still shows the old report, so it is not read as a live clock an hour behind.
    const next = await registry(options).acquire({ node: nodeOf(name, 2), maxWorkerId: 1 });
    expect(next.workerId).toBe(1);
    await expect(quiet.report(-1)).rejects.toMatchObject({ code: ErrorCodes.INVALID_ARGUMENT });
    await quiet.release();
    await next.release();
  });

  it("refuses a leaf name that normal mode or the Leaf fork's recycle mode uses", async () => {
    const normalName = uniqueName("normal");
    const fixed = await new ZookeeperRegistry(testOptions(fx.zk.connectString)).acquire({
      node: nodeOf(normalName, 0),
      maxWorkerId: 1023,
    });
    const error = await rejection(
      registry().acquire({ node: nodeOf(normalName, 1), maxWorkerId: 1023 }),
    );
    expect(isLeafError(error, ErrorCodes.INVALID_CONFIG)).toBe(true);
    expect((error as Error).message).toMatch(/normal mode/);
    await fixed.release();

    const forkName = uniqueName("fork");
    await fx.admin.mkdirp(`/snowflake/${forkName}/recycle/inuse`);
    await fx.admin.create(
      `/snowflake/${forkName}/recycle/inuse/workId:3`,
      JSON.stringify({
        workId: 3,
        lastUsedIp: "10.0.0.1",
        lastUsedPort: "8080",
        lastUsedTimestamp: 1,
      }),
      zookeeper.CreateMode.PERSISTENT,
    );
    const fork = await rejection(
      registry().acquire({ node: nodeOf(forkName, 0), maxWorkerId: 1023 }),
    );
    expect(isLeafError(fork, ErrorCodes.INVALID_CONFIG)).toBe(true);
    expect((fork as Error).message).toMatch(/fork's zk_recycle/);
  });
});
