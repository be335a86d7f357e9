// Checks that need no server: bad options and requests get errors naming the key and the value,
// Java Leaf's node names and data parse, digest ids match ZooKeeper's, and the peer clock check's
// arithmetic.
import { ErrorCodes, isLeafError, type LeafError } from "@leaf/core";
import { describe, expect, it } from "vitest";
import { digestAclId, ZookeeperRegistry, type ZookeeperRegistryOptions } from "../src/index";
import { decodeEndpoint, encodeEndpoint, parseForeverChild } from "../src/paths";
import { checkPeerClocks } from "../src/peer-clock";

function configErrorOf(options: unknown): LeafError {
  try {
    new ZookeeperRegistry(options as ZookeeperRegistryOptions);
  } catch (error) {
    if (isLeafError(error)) return error;
    throw error;
  }
  throw new Error("expected INVALID_CONFIG");
}

describe("options", () => {
  const base = { url: "127.0.0.1:2181" };

  it.each([
    ["url", { url: "" }],
    ["url", { url: "local host:2181" }],
    ["url", { url: "[::1]:2181" }],
    ["url", { url: "localhost:99999" }],
    ["url", { url: "localhost:2181/" }],
    ["url", { url: "localhost:2181/a//b" }],
    ["mode", { ...base, mode: "fancy" }],
    ["sessionTimeoutMs", { ...base, sessionTimeoutMs: -1 }],
    ["connectTimeoutMs", { ...base, connectTimeoutMs: 1.5 }],
    ["acl", { ...base, acl: "creator" }],
    ["acl", { ...base, acl: [{ scheme: "world", id: "anyone", permissions: ["fly"] }] }],
    ["auth", { ...base, auth: { username: "a:b", password: "x" } }],
    ["peerClockCheck.maxSkewMs", { ...base, peerClockCheck: { maxSkewMs: 0 } }],
    ["cacheFile", { ...base, cacheFile: 42 }],
    ["javaCacheFile", { ...base, javaCacheFile: "" }],
    ["stopWithoutSession", { ...base, stopWithoutSession: "yes" }],
    ["clockToleranceMs", { ...base, clockToleranceMs: -5 }],
  ])("rejects a bad %s with INVALID_CONFIG naming it", (key, options) => {
    const error = configErrorOf(options);
    expect(error.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(error.details.key).toBe(key);
    expect(error.message).toContain(`invalid ${key}`);
  });

  it("takes no client, saying why", () => {
    const client = configErrorOf({ ...base, url: undefined, client: {} } as never);
    expect(client.details.key).toBe("client");
    expect(client.message).toContain("whose loss it must see to fence");
  });

  it("accepts several servers and a chroot", () => {
    const registry = new ZookeeperRegistry({
      url: "a:2181,b:2182,c/leaf/prod",
    });
    expect(registry.kind).toBe("zk");
    expect(registry.mode).toBe("normal");
  });

  it.each([
    ["node.name", { node: { name: "a/b", ip: "10.0.0.1", port: 8080 }, maxWorkerId: 1023 }],
    ["node.ip", { node: { name: "a", ip: "", port: 8080 }, maxWorkerId: 1023 }],
    ["node.port", { node: { name: "a", ip: "10.0.0.1", port: 0 }, maxWorkerId: 1023 }],
    ["maxWorkerId", { node: { name: "a", ip: "10.0.0.1", port: 8080 }, maxWorkerId: -1 }],
    ["backups", { node: { name: "a", ip: "10.0.0.1", port: 8080 }, maxWorkerId: 3, backups: 1.5 }],
  ])("rejects an acquire with a bad %s before connecting", async (name, request) => {
    const registry = new ZookeeperRegistry(base);
    const error = await registry.acquire(request as never).catch((e: LeafError) => e);
    expect(isLeafError(error, ErrorCodes.INVALID_ARGUMENT)).toBe(true);
    expect((error as LeafError).details.name).toBe(name);
  });

  it("refuses to acquire once closed", async () => {
    const registry = new ZookeeperRegistry(base);
    await registry.close();
    await expect(
      registry.acquire({ node: { name: "a", ip: "10.0.0.1", port: 8080 }, maxWorkerId: 3 }),
    ).rejects.toMatchObject({ code: ErrorCodes.CLOSED });
  });
});

describe("Java Leaf's formats", () => {
  it("parses forever node names as Java Leaf writes them", () => {
    expect(parseForeverChild("10.0.0.7:8080-0000000619")).toEqual({
      name: "10.0.0.7:8080-0000000619",
      key: "10.0.0.7:8080",
      sequence: 619,
    });
    expect(parseForeverChild("10.0.0.7:8080~backup1-0000000003")?.key).toBe(
      "10.0.0.7:8080~backup1",
    );
    expect(parseForeverChild("garbage")).toBeUndefined();
  });

  it("writes and reads the endpoint data with the port as a string", () => {
    const data = encodeEndpoint({ name: "x", ip: "10.0.0.7", port: 8080 }, 1588421624602);
    expect(data.toString()).toBe('{"ip":"10.0.0.7","port":"8080","timestamp":1588421624602}');
    expect(decodeEndpoint("/p", data).timestamp).toBe(1588421624602);
    const error = (() => {
      try {
        decodeEndpoint("/snowflake/x/forever/n-0000000001", Buffer.from('{"timestamp":"soon"}'));
      } catch (e) {
        return e as LeafError;
      }
    })();
    expect(error?.code).toBe(ErrorCodes.CORRUPT_DATA);
    expect(error?.message).toContain("/snowflake/x/forever/n-0000000001");
  });

  it("computes digest ids as ZooKeeper does", () => {
    // As the server itself reported for leaf:s3cret.
    expect(digestAclId("leaf", "s3cret")).toBe("leaf:NNjrsGu9Zat2UBtg0CovdvclWC0=");
  });
});

describe("peer clock check", () => {
  const server = 1_800_000_000_000;

  it("compares clock offsets, so the age of a report does not count as skew", () => {
    const result = checkPeerClocks({
      now: server + 20,
      serverNow: server,
      // Reported 2.9 s ago by clocks 10 and 30 ms ahead of the server.
      peers: [
        { key: "a", timestamp: server - 2_900 + 10, storedAt: server - 2_900 },
        { key: "b", timestamp: server - 1_000 + 30, storedAt: server - 1_000 },
      ],
      maxSkewMs: 50,
      liveWindowMs: 10_000,
    });
    expect(result).toEqual({ peers: 2, skewMs: 0 });
  });

  it("ignores peers that have not reported within the live window", () => {
    const result = checkPeerClocks({
      now: server,
      serverNow: server,
      peers: [{ key: "old", timestamp: server, storedAt: server - 60_000 }],
      maxSkewMs: 50,
      liveWindowMs: 10_000,
    });
    expect(result.peers).toBe(0);
  });

  it("refuses with CLOCK_SKEW, both clocks in the message", () => {
    let error: unknown;
    try {
      checkPeerClocks({
        now: server + 10_000,
        serverNow: server,
        peers: [{ key: "10.0.0.1:8080", timestamp: server, storedAt: server }],
        maxSkewMs: 5_000,
        liveWindowMs: 10_000,
      });
    } catch (e) {
      error = e;
    }
    expect(isLeafError(error, ErrorCodes.CLOCK_SKEW)).toBe(true);
    expect((error as Error).message).toContain(new Date(server + 10_000).toISOString());
    expect((error as Error).message).toContain(new Date(server).toISOString());
    expect((error as Error).message).toContain("10000 ms ahead of 10.0.0.1:8080");
  });

  // Meituan's blog compares with the peers' average: one peer an hour ahead moved the average 30
  // minutes off the two right clocks, and after a ZooKeeper outage no node could take a lease
  // again (the nemesis's 60-minute run of 28 Nov, seed 2816).
  const peer = (key: string, offsetMs: number) => ({
    key,
    timestamp: server - 1_000 + offsetMs,
    storedAt: server - 1_000,
  });
  const check = (ownOffsetMs: number, peers: ReturnType<typeof peer>[]) =>
    checkPeerClocks({
      now: server + ownOffsetMs,
      serverNow: server,
      peers,
      maxSkewMs: 5_000,
      liveWindowMs: 10_000,
    });

  it("lets a right clock start beside a peer an hour ahead when another live peer agrees with it", () => {
    expect(check(0, [peer("a", 3_600_000), peer("b", 200)]).peers).toBe(2);
    expect(check(0, [peer("a", 3_600_000), peer("b", 200), peer("c", -300)])).toEqual({
      peers: 3,
      skewMs: -200,
    });
  });

  it("refuses the clock an hour ahead, off every other live peer", () => {
    let error: unknown;
    try {
      check(3_600_000, [peer("b", 0), peer("c", 100)]);
    } catch (e) {
      error = e;
    }
    expect(isLeafError(error, ErrorCodes.CLOCK_SKEW)).toBe(true);
    expect((error as Error).message).toContain("more than 5000 ms off 2 of 2 live peer(s)");
    expect((error as Error).message).toContain("3600000 ms ahead of b, 3599900 ms ahead of c");
  });

  it("refuses when more than half of the live peers disagree, and with one live peer that does", () => {
    const refused = (own: number, peers: ReturnType<typeof peer>[]) => {
      try {
        check(own, peers);
        return false;
      } catch (e) {
        return isLeafError(e, ErrorCodes.CLOCK_SKEW);
      }
    };
    expect(refused(0, [peer("a", 3_600_000)])).toBe(true);
    expect(refused(0, [peer("a", 6_000), peer("b", -6_000), peer("c", 0)])).toBe(true);
    expect(refused(0, [peer("a", 6_000), peer("b", 0), peer("c", 0)])).toBe(false);
    expect(refused(0, [peer("a", 5_000), peer("b", -5_000)])).toBe(false);
  });
});
