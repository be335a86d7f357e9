// The client of the sequence: ids from cached per-second ranges (slot-cache.ts) that the range
// allocator takes from Redis (range-allocator.ts), waits for the next second or for a fence to
// pass, and an honest error (or, on request, the random fallback: fallback.ts) when Redis
// is down.
import { argumentError, delay, type Layout, type LeafError } from "@leaf/core";
import { RedisLink } from "@leaf/redis-support";
import { namespaceSettings, SequenceErrors } from "./errors";
import { Fallback } from "./fallback";
import { IdBits } from "./id-bits";
import { checkPrefix, type ParsedSequenceId, SequenceIdFormat } from "./id-format";
import { type SequenceKeys, sequenceKeys } from "./keys";
import { type RedisSequenceOptions, type ResolvedOptions, resolveOptions } from "./options";
import { RangeAllocator } from "./range-allocator";
import { SequenceClock } from "./sequence-clock";
import { type Slot, SlotCache } from "./slot-cache";
import {
  copyStats,
  emptyStats,
  fenceState,
  type RedisSequenceState,
  sequenceStatus,
  slotStates,
} from "./state";

const COMPONENT = "redis-sequence";
/** Round trips in a row that bring no range (a jumping clock) before a call gives up. */
const MAX_FRUITLESS_REFILLS = 20;
const MAX_BATCH_IDS = 1_000_000;

/**
 * Ids of 1 + 32 bits of seconds + 12 bits of shard + 19 bits of sequence (by default), with the
 * sequences of each second allocated in ranges by a Lua script in Redis (the Redis Lua shard
 * sequence).
 *
 * Create it with `new RedisSequence({ url | client, namespace })`; `await start()` connects and
 * checks Redis (the first call does it for you); take ids with `await nextId(shard)`, or
 * `tryNextIdSync(shard)` when a cached range is enough.
 */
export class RedisSequence {
  /** The string form and parsing, usable without Redis. */
  readonly idFormat: SequenceIdFormat;
  /** The bit layout. */
  readonly layout: Layout;
  /** Redis key names of the namespace. */
  readonly keys: SequenceKeys;
  private readonly o: ResolvedOptions;
  private readonly link: RedisLink;
  private readonly clock: SequenceClock;
  private readonly cache: SlotCache;
  private readonly bits: IdBits;
  private readonly errors: SequenceErrors;
  private readonly fallback: Fallback;
  private readonly allocator: RangeAllocator;
  private readonly stats = emptyStats();

  private started = false;
  private starting: Promise<void> | undefined;
  private closed = false;

  /**
   * Validates the options and prepares the client; nothing is sent to Redis yet. {@link start}
   * connects and checks Redis; the first call runs it for you. Call it yourself to fail fast at
   * boot.
   */
  constructor(options: RedisSequenceOptions) {
    const o = resolveOptions(options);
    this.o = o;
    this.keys = sequenceKeys(o.namespace, o.keyPrefix);
    this.idFormat = new SequenceIdFormat({ layout: o.layout, timeZone: o.timeZone });
    this.layout = o.layout;
    this.clock = new SequenceClock(o.clock, o.timeSource === "redis");
    this.cache = new SlotCache(o.layout, o.sequenceScope, o.minBatchSize);
    this.link = new RedisLink({
      ...options,
      component: "redis-sequence",
      timeoutMs: o.connectTimeoutMs,
    });
    const settings = namespaceSettings(o);
    this.errors = new SequenceErrors(o, this.link.description, this.keys, settings);
    this.bits = new IdBits(o.layout, this.errors);
    this.fallback = new Fallback(o, this.link.description, this.stats, this.errors, this.bits);
    this.allocator = new RangeAllocator({
      o,
      link: this.link,
      keys: this.keys,
      settings,
      clock: this.clock,
      stats: this.stats,
      fallback: this.fallback,
      errors: this.errors,
      isClosed: () => this.closed,
    });
  }

  /**
   * Connects (when made from a URL), reads Redis TIME and the namespace's fence, and checks the
   * eviction policy. Idempotent; a failed start is tried again by the next call.
   * @throws LeafError UNAVAILABLE when Redis does not answer within connectTimeoutMs.
   */
  start(): Promise<void> {
    if (this.closed) return Promise.reject(this.errors.closed());
    this.starting ??= this.doStart().catch((error: unknown) => {
      this.starting = undefined;
      throw error;
    });
    return this.starting;
  }

  /**
   * The next id for `shard` (0 .. layout.maxWorkerId) as a bigint. Served from a cached range when
   * there is one; otherwise takes a range from Redis (one round trip per counter however many
   * callers wait). When the second's sequence space is used up, or Redis fences the second after
   * a restart, waits for the next usable second if that is within maxWaitMs.
   * @throws LeafError INVALID_ARGUMENT (shard), SEQUENCE_EXHAUSTED, UNAVAILABLE (Redis unreachable
   * and the cache used up, or a fence longer than maxWaitMs), CLOCK_SKEW, CLOSED.
   */
  async nextId(shard: number): Promise<bigint> {
    const id = this.tryNextIdSync(shard);
    return id === undefined ? this.nextIdSlow(shard) : id;
  }

  /**
   * The next id for `shard` from a cached range, or undefined when none is cached for the current
   * second (a refill is then started in the background). Never waits and never throws for Redis
   * trouble; throws for a bad shard or a closed sequence.
   */
  tryNextIdSync(shard: number): bigint | undefined {
    if (this.closed) throw this.errors.closed();
    const slot = this.cache.slotFor(shard);
    if (!this.started) {
      this.start().catch(() => {});
      return undefined;
    }
    const second = this.clock.currentSecond();
    const sequence = this.take(slot, second);
    if (sequence < 0) {
      this.kick(slot, second);
      return undefined;
    }
    return this.bits.compose(slot.second, shard, sequence);
  }

  /**
   * `count` ids (1 to 1,000,000) for `shard`, taken like nextId(); consecutive sequences of a
   * range give consecutive ids.
   */
  async nextIds(shard: number, count: number): Promise<bigint[]> {
    if (this.closed) throw this.errors.closed();
    const slot = this.cache.slotFor(shard);
    if (!Number.isInteger(count) || count < 1 || count > MAX_BATCH_IDS) {
      throw argumentError(COMPONENT, "count", count, "an integer from 1 to 1,000,000");
    }
    const out: bigint[] = [];
    while (out.length < count) {
      const taken = this.started ? slot.takeRun(this.clock.currentSecond(), count - out.length) : 0;
      if (taken > 0) {
        this.stats.ids += taken;
        let id = this.bits.compose(slot.second, shard, slot.next - taken);
        for (let i = 0; i < taken; i++) {
          out.push(id);
          id += 1n;
        }
        if (slot.low) this.kick(slot, slot.second);
      } else {
        out.push(await this.nextIdSlow(shard));
      }
    }
    return out;
  }

  /** The next id for `shard` in its string form: prefix + yyyyMMddHHmmss + sequence + shard. */
  async nextString(shard: number, prefix: string = this.o.prefix): Promise<string> {
    checkPrefix(prefix);
    return this.idFormat.format(await this.nextId(shard), prefix);
  }

  /** The string form of `id` (default prefix: the `prefix` option). */
  format(id: bigint | string, prefix: string = this.o.prefix): string {
    return this.idFormat.format(id, prefix);
  }

  /** Takes an id apart: bigint, decimal string, or string form. */
  parse(value: bigint | string): ParsedSequenceId {
    return this.idFormat.parse(value);
  }

  /** A snapshot for a monitor page or a health check. */
  state(): RedisSequenceState {
    const second = this.started ? this.clock.currentSecond() : Math.floor(Date.now() / 1000);
    const down = this.fallback.down;
    const fence = this.allocator.fence;
    return {
      namespace: this.o.namespace,
      hashTag: this.keys.hashTag,
      keyPrefix: this.o.keyPrefix,
      layout: this.layout.name,
      sequenceScope: this.o.sequenceScope,
      timeSource: this.o.timeSource,
      status: sequenceStatus({
        closed: this.closed,
        down: down !== undefined,
        randomFallback: this.o.whenRedisDown === "random",
        started: this.started,
        fenced: fence >= second,
      }),
      currentSecond: second,
      redis: {
        topology: this.link.topology,
        where: this.link.description,
        reachable: this.started && !down,
        lastError: down?.error.message,
        downSinceMs: down?.sinceMs,
        clockOffsetMs: this.clock.observedOffsetMs,
        lastRoundTripMicros: this.allocator.lastRoundTripMicros,
        evictionPolicies: this.allocator.evictionPolicies,
        runId: this.allocator.runId,
      },
      fence: fenceState(fence, second),
      slots: slotStates(this.cache.all(), second),
      stats: copyStats(this.stats),
    };
  }

  /**
   * Stops handing out ids (calls fail with CLOSED) and quits the Redis client when it was made
   * from a URL; a client passed in stays open. Unused cached sequences are simply never used.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.link.close();
  }

  private async doStart(): Promise<void> {
    const redisMs = await this.allocator.probe();
    this.started = true;
    await this.allocator.checkServer(redisMs);
  }

  /** One sequence of `slot` for `second`, or -1; starts a refill when the cache runs low. */
  private take(slot: Slot, second: number): number {
    const sequence = slot.take(second);
    if (sequence < 0) return -1;
    this.stats.ids++;
    if (slot.low && slot.refill === undefined) this.kick(slot, slot.second);
    return sequence;
  }

  /** Starts a background refill when one may help and none is in flight. */
  private kick(slot: Slot, second: number): void {
    if (slot.refill || this.closed || !this.started) return;
    if (this.allocator.fence >= second || slot.usedUpSecond >= second) return;
    if (slot.floorSecond > second || this.fallback.backingOff()) return;
    this.allocator.refill(slot, second).catch(() => {
      // Recorded in the fallback's down state or the stats; the next caller that needs a range sees
      // it.
    });
  }

  // ---- the slow path: round trips, waits, the fallback ----

  private async nextIdSlow(shard: number): Promise<bigint> {
    const slot = this.cache.slotFor(shard);
    const deadline = performance.now() + this.o.maxWaitMs;
    let fruitless = 0;
    for (;;) {
      if (this.closed) throw this.errors.closed();
      try {
        if (!this.started) await this.start();
      } catch (error) {
        return this.fallback.randomOr(error, slot, shard, Math.floor(this.o.clock.now() / 1000));
      }
      const second = this.clock.currentSecond();
      const sequence = this.take(slot, second);
      if (sequence >= 0) return this.bits.compose(slot.second, shard, sequence);
      const fence = this.allocator.fence;
      if (fence >= second) {
        await this.waitForSecond(fence + 1, deadline, () => this.errors.fenced(second, fence));
        continue;
      }
      if (slot.floorSecond > second) {
        const floor = slot.floorSecond;
        await this.waitForSecond(floor, deadline, () =>
          this.errors.behind(second, floor, slot.shard),
        );
        continue;
      }
      if (slot.usedUpSecond >= second) {
        await this.waitForSecond(slot.usedUpSecond + 1, deadline, () =>
          this.errors.exhausted(slot.usedUpSecond),
        );
        continue;
      }
      if (this.fallback.backingOff()) return this.fallback.whileDown(slot, shard, second);
      if (fruitless > MAX_FRUITLESS_REFILLS) {
        throw this.errors.noProgress(second, MAX_FRUITLESS_REFILLS);
      }
      try {
        const ranges = this.stats.ranges;
        await this.allocator.refill(slot, second);
        // Ranges taken by other callers first still count as progress; only empty answers do not.
        if (this.stats.ranges === ranges) fruitless++;
      } catch (error) {
        return this.fallback.randomOr(error, slot, shard, second);
      }
    }
  }

  /**
   * Waits until the clock reaches `second`, or throws `failure()` when that is past the deadline.
   */
  private async waitForSecond(
    second: number,
    deadline: number,
    failure: () => LeafError,
  ): Promise<void> {
    const waitMs = second * 1000 - this.clock.nowMs();
    if (waitMs <= 0) return;
    if (performance.now() + waitMs > deadline) throw failure();
    this.stats.waits++;
    await delay(Math.min(Math.ceil(waitMs), 1000));
  }
}
