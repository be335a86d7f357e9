// Clients of one namespace must share keyPrefix, sequenceScope and layout: with another key prefix
// or scope their counters start at 0 for the same seconds, with another layout the bits mean other
// things, and either way they hand out the same ids. The namespace's settings marker records the
// first client's settings; a client with other settings refuses to start (or, already running,
// to allocate), naming both.
import {
  defineLayout,
  ErrorCodes,
  isLeafError,
  type LeafError,
  layouts,
  ManualClock,
} from "@leaf/core";
import { started } from "@leaf/testkit";
import { describe, expect, it } from "vitest";
import { RedisSequence, type RedisSequenceOptions } from "../src/index";
import { freshNamespace, passFenceManually, redisFixture, warningSink } from "./helpers";

const SKEW_MS = 3000;
const fx = redisFixture("settings", { maxClockSkewMs: SKEW_MS, fenceMarginMs: 0 });
const IDS = 200;

/** Both clients' options: one namespace, one clock, and what each sets differently. */
function options(
  namespace: string,
  clock: ManualClock,
  own: Partial<RedisSequenceOptions>,
): RedisSequenceOptions {
  return {
    url: fx.redis.url,
    namespace,
    clock,
    maxClockSkewMs: SKEW_MS,
    fenceMarginMs: 0,
    batchSize: IDS,
    minBatchSize: IDS,
    onWarning: warningSink().onWarning,
    ...own,
  };
}

async function startedSequence(opts: RedisSequenceOptions): Promise<RedisSequence> {
  const created = await started(new RedisSequence(opts));
  fx.open.push(created);
  return created;
}

/**
 * Starts the second client of a rolling config change beside `first` and returns its refusal. If
 * it starts, both take IDS ids for shard 0 in one second, and the failure says how many are equal.
 */
async function refusalOfSecond(
  first: RedisSequence,
  clock: ManualClock,
  opts: RedisSequenceOptions,
): Promise<LeafError> {
  let second: RedisSequence;
  try {
    second = await startedSequence(opts);
  } catch (error) {
    if (isLeafError(error)) return error;
    throw error;
  }
  await passFenceManually(second, clock, SKEW_MS);
  await passFenceManually(first, clock, SKEW_MS);
  const mine = new Set(await first.nextIds(0, IDS));
  const theirs = await second.nextIds(0, IDS);
  const same = theirs.filter((id) => mine.has(id)).length;
  throw new Error(
    `the second client started with other settings; ${same} of its ${IDS} ids equal the first client's`,
  );
}

describe("the settings marker", () => {
  it("records the first client's keyPrefix, sequenceScope and layout", async () => {
    const seq = await fx.sequence({ sequenceScope: "shard" });
    const recorded = await fx.raw.hgetall(seq.keys.settings());
    expect(recorded).toMatchObject({
      key_prefix: "leaf:",
      sequence_scope: "shard",
      layout: "32+12+19 bits, unit 1000 ms, epoch 2020-01-01T00:00:00.000Z",
    });
    // Its name does not carry the key prefix: clients with another prefix find it.
    expect(seq.keys.settings()).toBe(`leaf-sequence:{${seq.keys.namespace}}:settings`);
    // A client with the same settings shares the namespace.
    const same = await startedSequence({
      url: fx.redis.url,
      namespace: seq.keys.namespace,
      sequenceScope: "shard",
      maxClockSkewMs: SKEW_MS,
      fenceMarginMs: 0,
      onWarning: warningSink().onWarning,
    });
    expect(same.state().status).not.toBe("closed");
  });

  it("refuses a client with another sequenceScope, naming both settings", async () => {
    const namespace = freshNamespace("scope");
    const clock = new ManualClock(Date.now());
    const first = await startedSequence(options(namespace, clock, { sequenceScope: "namespace" }));
    const error = await refusalOfSecond(
      first,
      clock,
      options(namespace, clock, { sequenceScope: "shard" }),
    );
    expect(error.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(error.details.key).toBe("sequenceScope");
    expect(error.message).toContain('sequenceScope "namespace"');
    expect(error.message).toContain('sequenceScope "shard"');
    expect(error.message).toContain(`leaf-sequence:{${namespace}}:settings`);
    // The first client is unaffected.
    await passFenceManually(first, clock, SKEW_MS);
    await expect(first.nextIds(0, 10)).resolves.toHaveLength(10);
  });

  it("refuses a rolling change of keyPrefix that would hand out the same ids", async () => {
    const namespace = freshNamespace("prefix");
    const clock = new ManualClock(Date.now());
    const first = await startedSequence(options(namespace, clock, {}));
    const error = await refusalOfSecond(
      first,
      clock,
      options(namespace, clock, { keyPrefix: "orders-v2:" }),
    );
    expect(error.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(error.details.key).toBe("keyPrefix");
    expect(error.message).toContain('keyPrefix "leaf:"');
    expect(error.message).toContain('keyPrefix "orders-v2:"');
    // Nothing was written under the refused prefix.
    expect(await fx.raw.keys(`orders-v2:{${namespace}}:*`)).toEqual([]);
  });

  it("refuses a client with another layout, naming both layouts", async () => {
    const namespace = freshNamespace("layout");
    const clock = new ManualClock(Date.now());
    const first = await startedSequence(
      options(namespace, clock, { layout: layouts.redisSequence }),
    );
    const other = defineLayout({
      name: "redis-sequence",
      timestampBits: 32,
      workerBits: 13,
      sequenceBits: 18,
      unitMillis: 1000,
      epoch: Date.UTC(2020, 0, 1),
    });
    const error = await refusalOfSecond(first, clock, options(namespace, clock, { layout: other }));
    expect(error.code).toBe(ErrorCodes.INVALID_CONFIG);
    expect(error.details.key).toBe("layout");
    expect(error.message).toContain("32+12+19 bits");
    expect(error.message).toContain("32+13+18 bits");
  });

  it("stops a running client whose settings no longer match the marker", async () => {
    const namespace = freshNamespace("running");
    const clock = new ManualClock(Date.now());
    const old = await startedSequence(
      options(namespace, clock, { sequenceScope: "namespace", batchSize: 10, minBatchSize: 10 }),
    );
    await passFenceManually(old, clock, SKEW_MS);
    const before = await old.nextIds(0, 10);
    // An operator resets the marker while `old` still runs, and a client with a new scope claims
    // it.
    await fx.raw.del(old.keys.settings());
    const next = await startedSequence(options(namespace, clock, { sequenceScope: "shard" }));
    expect(await fx.raw.hget(next.keys.settings(), "sequence_scope")).toBe("shard");
    // What it holds was granted before the change and may be served; no new range is granted.
    const served: bigint[] = [];
    let refused: unknown;
    while (refused === undefined && served.length < 100) {
      await old.nextId(0).then(
        (id) => served.push(id),
        (error: unknown) => {
          refused = error;
        },
      );
    }
    expect(
      isLeafError(refused, ErrorCodes.INVALID_CONFIG),
      `${served.length} ids, then ${refused}`,
    ).toBe(true);
    expect((refused as LeafError).message).toContain('sequenceScope "shard"');
    expect(served.length).toBeLessThanOrEqual(10);
    expect(before).toHaveLength(10);
  });
});
