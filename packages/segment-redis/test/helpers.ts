// Shared by the fault tests: unique namespaces, and a load of "nodes" taking ranges through a
// fault. Every id of every range a node got is kept (an IdLog), so that a test counts the ids
// handed out twice. A node that is refused restarts (a new store instance, without the old one's
// floors), and a provisioning script re-creates a tag the store calls unknown, as an operator
// would: that is how a Redis that lost writes would repeat ids if the store let it.
import { randomBytes } from "node:crypto";
import { ErrorCodes, isLeafError } from "@leaf/core";
import type { SegmentRange } from "@leaf/segment";
import { countRepeatedIds, IdLog, type RedisReplicaSet, startRedisReplicaSet } from "@leaf/testkit";
import { afterEach } from "vitest";
import type { RedisSegmentStore } from "../src/index";

/** A namespace no other test uses. */
export function freshNamespace(label: string): string {
  return `t-${label}-${randomBytes(4).toString("hex")}`;
}

/** Resolves after `ms` of real time. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** `CODE:reason:takeover` of an error, for counting what a load was answered. */
export function outcomeOf(error: unknown): string {
  if (!isLeafError(error)) return `other:${error instanceof Error ? error.message : String(error)}`;
  const details = error.details ?? {};
  return [error.code, details.reason, details.takeover].filter((v) => v !== undefined).join(":");
}

/** Options of {@link RangeLoad}. */
export interface RangeLoadOptions {
  /** Opens a new store instance (a node, or a node restarted). */
  open: () => Promise<RedisSegmentStore>;
  tags: readonly string[];
  /** Nodes taking ranges at once. */
  nodes: number;
  /** Step of a tag re-created by the provisioning script. */
  step: number;
}

/** Nodes taking ranges until stopped; every id of every range is kept, per tag. */
export class RangeLoad {
  /** The ids handed out, per tag (ids are unique within a tag). */
  readonly ids = new Map<string, IdLog>();
  /** What the nodes were answered, by {@link outcomeOf}, besides ranges. */
  readonly outcomes = new Map<string, number>();
  /** Ranges taken, in total and since {@link mark}. */
  ranges = 0;
  rangesSinceMark = 0;
  /** Node restarts after a refusal. */
  restarts = 0;
  /** Ranges and refusals, in total. */
  answers = 0;
  private stopped = false;
  private readonly running: Promise<void>[] = [];

  constructor(private readonly options: RangeLoadOptions) {}

  start(): this {
    for (const tag of this.options.tags) this.ids.set(tag, new IdLog());
    for (let n = 0; n < this.options.nodes; n++) this.running.push(this.node(n));
    return this;
  }

  /** Starts counting ranges afresh (rangesSinceMark). */
  mark(): void {
    this.rangesSinceMark = 0;
  }

  /** Resolves once the nodes were answered (a range or an error) `count` more times. */
  async waitForAnswers(count: number, timeoutMs = 30_000): Promise<void> {
    const target = this.answers + count;
    const until = Date.now() + timeoutMs;
    while (this.answers < target) {
      if (Date.now() > until)
        throw new Error(`the load got ${this.answers} answers, waited for ${target}`);
      await sleep(20);
    }
  }

  /** Resolves once `count` more ranges were taken after the call. */
  async waitForRanges(count: number, timeoutMs = 30_000): Promise<void> {
    const target = this.ranges + count;
    const until = Date.now() + timeoutMs;
    while (this.ranges < target) {
      if (Date.now() > until) {
        throw new Error(
          `the load took ${this.ranges} ranges, waited for ${target}; answers: ${JSON.stringify([...this.outcomes])}`,
        );
      }
      await sleep(20);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.running);
  }

  private count(outcome: string): void {
    this.outcomes.set(outcome, (this.outcomes.get(outcome) ?? 0) + 1);
  }

  private async node(index: number): Promise<void> {
    const { tags } = this.options;
    let store = await this.options.open();
    let turn = index;
    try {
      while (!this.stopped) {
        const tag = tags[turn++ % tags.length]!;
        try {
          const range = await store.takeRange(tag);
          const log = this.ids.get(tag)!;
          for (let id = range.start; id < range.end; id++) log.push(id);
          this.ranges++;
          this.rangesSinceMark++;
          this.answers++;
        } catch (error) {
          this.count(outcomeOf(error));
          this.answers++;
          if (!isLeafError(error, ErrorCodes.UNAVAILABLE)) {
            // Refused: the node restarts, and an unknown tag is created again from its default.
            await store.close();
            store = await this.options.open();
            this.restarts++;
            if (isLeafError(error, ErrorCodes.UNKNOWN_TAG)) {
              await store
                .createTag({ tag, step: this.options.step })
                .then(() => this.count("provisioned"))
                .catch((e: unknown) => this.count(`provision:${outcomeOf(e)}`));
            }
          }
          await sleep(20);
        }
      }
    } finally {
      await store.close();
    }
  }
}

/** Ids handed out twice across `loads`, tag by tag, and the highest id of any tag. */
export function repeatedIds(loads: readonly RangeLoad[]): {
  total: number;
  duplicates: number;
  highest: bigint;
} {
  const tags = new Set(loads.flatMap((load) => [...load.ids.keys()]));
  let total = 0;
  let duplicates = 0;
  let highest = 0n;
  for (const tag of tags) {
    const count = countRepeatedIds(loads.flatMap((load) => load.ids.get(tag) ?? []));
    total += count.total;
    duplicates += count.duplicates;
    const top = count.sorted.at(-1);
    if (top !== undefined && top > highest) highest = top;
  }
  return { total, duplicates, highest };
}

/** Pushes every id of `range` to `ids`. */
export function collectRange(ids: bigint[], range: SegmentRange): void {
  for (let id = range.start; id < range.end; id++) ids.push(id);
}

/**
 * Takes up to `count` ranges of `tag`, collecting their ids: "answered", or the outcome of the
 * first refusal (nothing taken after it).
 */
export async function takeRanges(
  store: RedisSegmentStore,
  tag: string,
  ids: bigint[],
  count: number,
): Promise<string> {
  for (let i = 0; i < count; i++) {
    try {
      collectRange(ids, await store.takeRange(tag));
    } catch (error) {
      return outcomeOf(error);
    }
  }
  return "answered";
}

/**
 * Registers a replica set per test, disposed after each test: the function returned starts one
 * with `replicas` replicas (each through its link) and waits until they are in sync.
 */
export function replicaSetPerTest(): (replicas: number) => Promise<RedisReplicaSet> {
  let set: RedisReplicaSet | undefined;
  afterEach(async () => {
    await set?.dispose();
    set = undefined;
  });
  return async (replicas) => {
    set = await startRedisReplicaSet({ replicas });
    await set.waitInSync();
    return set;
  };
}
