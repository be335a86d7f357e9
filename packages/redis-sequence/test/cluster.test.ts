// Redis Cluster: three masters started through the test kit with --cluster-enabled. All keys of an
// allocation carry the hash tag {namespace}, so they live in one slot on one master.
import { type RedisHandle, started, startRedisCluster } from "@leaf/testkit";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisSequence } from "../src/index";
import { duplicates, freshNamespace } from "./helpers";

const nodes: RedisHandle[] = [];
const open: RedisSequence[] = [];
let cluster: Cluster | undefined;

beforeAll(async () => {
  nodes.push(...(await startRedisCluster()));
});

afterAll(async () => {
  await Promise.all(open.map((s) => s.close()));
  cluster?.disconnect();
  await Promise.all(nodes.map((n) => n.dispose()));
});

describe("Redis Cluster", () => {
  it("hands out unique ids from node URLs, every key of the namespace in one slot", async () => {
    const namespace = freshNamespace("cluster");
    const seq = await started(
      new RedisSequence({
        url: nodes.map((n) => n.url),
        namespace,
        maxClockSkewMs: 500,
        fenceMarginMs: 0,
        batchSize: 100,
        onWarning: () => {},
      }),
    );
    open.push(seq);
    const ids: bigint[] = [];
    for (let i = 0; i < 3000; i++) ids.push(await seq.nextId(i % 4096));
    expect(duplicates(ids)).toEqual([]);
    expect(seq.state().redis.topology).toBe("cluster");
    const second = seq.parse(ids.at(-1)!).second;
    const keys = [
      seq.keys.sequence(second),
      seq.keys.lock(second),
      seq.keys.sequence(second, 17),
      seq.keys.lock(second, 17),
      seq.keys.marker(),
    ];
    const probe = new Redis(nodes[0]!.url);
    try {
      const slots = await Promise.all(keys.map((k) => probe.cluster("KEYSLOT", k)));
      expect(new Set(slots).size).toBe(1);
    } finally {
      probe.disconnect();
    }
  });

  it("works with an ioredis Cluster passed in, keeping per-shard counters in the same slot", async () => {
    cluster = new Cluster(nodes.map((n) => ({ host: n.host, port: n.port })));
    const namespace = freshNamespace("cluster-client");
    const seq = await started(
      new RedisSequence({
        client: cluster,
        namespace,
        sequenceScope: "shard",
        maxClockSkewMs: 500,
        fenceMarginMs: 0,
        onWarning: () => {},
      }),
    );
    open.push(seq);
    const ids = [...(await seq.nextIds(5, 500)), ...(await seq.nextIds(6, 500))];
    expect(duplicates(ids)).toEqual([]);
    const second = seq.parse(ids[0]!).second;
    // The per-shard counters and the marker share one slot, and that slot's master holds them.
    const keys = [seq.keys.marker(), seq.keys.sequence(second, 5), seq.keys.sequence(second, 6)];
    const slots = await Promise.all(keys.map((k) => cluster!.cluster("KEYSLOT", k)));
    expect(new Set(slots).size).toBe(1);
    const owners = await Promise.all(
      // Other masters answer MOVED: the slot is not theirs.
      cluster.nodes("master").map((node) =>
        node.exists(...keys).then(
          (count) => count === keys.length,
          () => false,
        ),
      ),
    );
    expect(owners.filter(Boolean)).toHaveLength(1);
    await seq.close();
    expect(await cluster.ping()).toBe("PONG"); // a client passed in stays open
  });
});
