// The client of the sequence: per-second ranges of sequences taken from Redis by a Lua script and
// cached, one refill in flight per counter, waits for the next second or for a fence to pass, and
// an honest error (or, on request, seed 002's random fallback) when Redis cannot be reached.
import {
  argumentError,
  backoffDelay,
  delay,
  ErrorCodes,
  isLeafError,
  type Layout,
  LeafError,
} from "@leaf/core";
import { RedisLink, RedisTimeoutError, unavailable } from "./connection";
import { checkPrefix, type ParsedSequenceId, SequenceIdFormat } from "./id-format";
import { type SequenceKeys, sequenceKeys } from "./keys";
import {
  allocateScript,
  parseRefusal,
  parseSettingsRefusal,
  probeScript,
  type RecordedSettings,
} from "./lua-scripts";
import { type RedisSequenceOptions, type ResolvedOptions, resolveOptions } from "./options";

const COMPONENT = "redis-sequence";
const YEAR_MS = 365 * 86_400_000;
/** Round trips in a row that bring no range (a jumping clock) before a call gives up. */
const MAX_FRUITLESS_REFILLS = 20;
const MAX_BATCH_IDS = 1_000_000;

/** A range of sequences, both ends included. */
interface Range {
  first: number;
  last: number;
}

/** The cached ranges of one counter: the namespace's, or one shard's (sequenceScope "shard"). */
class Slot {
  /** The second (Unix seconds) the cached ranges belong to; -1 before the first. */
  second = -1;
  /** Next sequence of the current range, and its last. */
  next = 0;
  last = -1;
  /** Further ranges of the same second (prefetched), in order. */
  queue: Range[] = [];
  /** Sequences left in the current and the queued ranges. */
  remaining = 0;
  /** Every range granted for `second`, to keep random fallback sequences out of them. */
  grants: Range[] = [];
  refillsThisSecond = 0;
  /** The latest second whose sequence space Redis reported used up (or locked). */
  usedUpSecond = -1;
  /**
   * The lowest second Redis grants this counter after it refused one at or below the counter's
   * high-water second (Redis TIME went back to seconds already served); -1 before any refusal.
   */
  floorSecond = -1;
  refill: Promise<void> | undefined;

  constructor(
    readonly shard: number | undefined,
    public batch: number,
  ) {}
}

/** What the monitor page shows about one cached counter. */
export interface SlotState {
  /** The shard, with sequenceScope "shard"; undefined for the namespace's counter. */
  shard: number | undefined;
  /** The second (Unix seconds) of the cached ranges; -1 before the first. */
  second: number;
  /** Sequences left in the cache for that second. */
  remaining: number;
  /** Ranges cached (the current one and prefetched ones). */
  ranges: number;
  /** Size of the next range asked for. */
  batchSize: number;
  /** True while a round trip for this counter is in flight. */
  refillInFlight: boolean;
  /** True when Redis reported the second's sequence space used up. */
  usedUp: boolean;
  /**
   * The lowest second Redis will grant this counter, after it refused a second at or below the
   * highest second it ever granted (its clock went back); -1 when none was refused.
   */
  floorSecond: number;
}

/** A snapshot for a monitor page or a health check. */
export interface RedisSequenceState {
  namespace: string;
  /** The hash tag every key carries, `{namespace}`. */
  hashTag: string;
  keyPrefix: string;
  layout: string;
  sequenceScope: "namespace" | "shard";
  timeSource: "application" | "redis";
  /**
   * "starting" before the first answer from Redis; "ready"; "fenced" while Redis refuses the
   * current second after a restart; "unavailable" while Redis cannot be reached ("random-fallback"
   * when random sequences are being handed out meanwhile); "closed".
   */
  status: "starting" | "ready" | "fenced" | "unavailable" | "random-fallback" | "closed";
  /** The current second (Unix seconds) by the configured time source. */
  currentSecond: number;
  redis: {
    topology: "single" | "cluster";
    /** Where Redis is, without passwords. */
    where: string;
    reachable: boolean;
    /** The last failure, while Redis is unreachable. */
    lastError: string | undefined;
    /** When Redis became unreachable (ms since the Unix epoch). */
    downSinceMs: number | undefined;
    /** Redis TIME minus the local clock, in ms, from the last round trip. */
    clockOffsetMs: number | undefined;
    /** Duration of the last round trip in microseconds. */
    lastRoundTripMicros: number | undefined;
    /** maxmemory-policy of each master, when Redis allowed reading it. */
    evictionPolicies: string[] | undefined;
    /** Redis process run id seen at start (a new one after a restart makes Redis fence). */
    runId: string | undefined;
  };
  /** The fence set after a Redis restart: seconds up to `untilSecond` are refused. */
  fence: { untilSecond: number; until: string; active: boolean } | undefined;
  /** Counters with cached ranges (the 100 most recent seconds' at most). */
  slots: SlotState[];
  stats: {
    /** Ids handed out from ranges. */
    ids: number;
    /** Ids with a random sequence (whenRedisDown "random"). */
    randomIds: number;
    /** Script calls sent to Redis (allocations and probes). */
    roundTrips: number;
    /** Ranges received. */
    ranges: number;
    /** Round trips that failed (Redis unreachable, too slow, or an unexpected answer). */
    failures: number;
    /**
     * Refusals by reason; `behind`: a second at or below the highest second Redis ever granted
     * the counter, whose counter is gone (Redis TIME went back).
     */
    refused: { skew: number; fenced: number; locked: number; exhausted: number; behind: number };
    /** Times a call waited for the next second or for a fence. */
    waits: number;
  };
}

interface DownState {
  sinceMs: number;
  attempts: number;
  retryAt: number;
  error: LeafError;
  randomWarned: boolean;
}

/**
 * Ids of 1 + 32 bits of seconds + 12 bits of shard + 19 bits of sequence (by default), with the
 * sequences of each second allocated in ranges by a Lua script in Redis (seed 002).
 *
 * Create it with {@link createRedisSequence}, which also checks Redis; take ids with
 * `await nextId(shard)`, or `tryNextIdSync(shard)` when a cached range is enough.
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
  private readonly epochSecond: number;
  private readonly maxShard: number;
  private readonly maxSequence: number;
  private readonly timestampShift: bigint;
  private readonly shardBits: bigint[] = [];
  private readonly slots: Slot[] = [];
  private readonly namespaceSlot: Slot | undefined;
  private readonly redisTime: boolean;
  /** The settings every client of the namespace must share, as the settings marker holds them. */
  private readonly settings: RecordedSettings;

  private offsetMs = 0;
  private observedOffsetMs: number | undefined;
  private lastRoundTripMicros: number | undefined;
  private fence = -1;
  private everGranted = false;
  private started = false;
  private starting: Promise<void> | undefined;
  private closed = false;
  private down: DownState | undefined;
  private runId: string | undefined;
  private evictionPolicies: string[] | undefined;
  private baseSecond = -1;
  private base = 0n;
  private randomSecond = -1;
  private readonly randomUsed = new Set<bigint>();
  private readonly stats: RedisSequenceState["stats"] = {
    ids: 0,
    randomIds: 0,
    roundTrips: 0,
    ranges: 0,
    failures: 0,
    refused: { skew: 0, fenced: 0, locked: 0, exhausted: 0, behind: 0 },
    waits: 0,
  };

  /**
   * Validates the options and prepares the client; nothing is sent to Redis yet. Prefer
   * {@link createRedisSequence}, which also connects and checks Redis. A sequence made with `new`
   * does that on its first call.
   */
  constructor(options: RedisSequenceOptions) {
    this.o = resolveOptions(options);
    this.keys = sequenceKeys(this.o.namespace, this.o.keyPrefix);
    this.idFormat = new SequenceIdFormat({ layout: this.o.layout, timeZone: this.o.timeZone });
    this.layout = this.o.layout;
    this.epochSecond = this.layout.epoch / 1000;
    this.maxShard = this.layout.maxWorkerId;
    this.maxSequence = this.layout.maxSequence;
    this.timestampShift = BigInt(this.layout.timestampShift);
    this.redisTime = this.o.timeSource === "redis";
    this.settings = {
      keyPrefix: this.o.keyPrefix,
      sequenceScope: this.o.sequenceScope,
      layout: layoutSetting(this.layout),
    };
    if (this.o.sequenceScope === "namespace") {
      this.namespaceSlot = new Slot(undefined, this.o.minBatchSize);
    }
    this.link = new RedisLink(options.redis, options.redisOptions, options.clusterOptions);
  }

  /**
   * Connects (when made from a URL), reads Redis TIME and the namespace's fence, and checks the
   * eviction policy. Called by createRedisSequence(); safe to call again.
   * @throws LeafError UNAVAILABLE when Redis does not answer within connectTimeoutMs.
   */
  start(): Promise<void> {
    if (this.closed) return Promise.reject(this.closedError());
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
    if (this.closed) throw this.closedError();
    const slot = this.slotFor(shard);
    if (!this.started) {
      this.start().catch(() => {});
      return undefined;
    }
    const second = this.currentSecond();
    const sequence = this.take(slot, second);
    if (sequence < 0) {
      this.kick(slot, second);
      return undefined;
    }
    return this.compose(slot.second, shard, sequence);
  }

  /**
   * `count` ids (1 to 1,000,000) for `shard`, taken like nextId(); consecutive sequences of a
   * range give consecutive ids.
   */
  async nextIds(shard: number, count: number): Promise<bigint[]> {
    if (this.closed) throw this.closedError();
    const slot = this.slotFor(shard);
    if (!Number.isInteger(count) || count < 1 || count > MAX_BATCH_IDS) {
      throw argumentError(COMPONENT, "count", count, "an integer from 1 to 1,000,000");
    }
    const out: bigint[] = [];
    while (out.length < count) {
      const taken = this.started ? this.takeRun(slot, this.currentSecond(), count - out.length) : 0;
      if (taken > 0) {
        let id = this.compose(slot.second, shard, slot.next - taken);
        for (let i = 0; i < taken; i++) {
          out.push(id);
          id += 1n;
        }
        if (slot.remaining * 4 < slot.batch) this.kick(slot, slot.second);
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
    const second = this.started ? this.currentSecond() : Math.floor(Date.now() / 1000);
    const all = this.namespaceSlot ? [this.namespaceSlot] : this.slots.filter(Boolean);
    const slots = all
      .filter((s) => s.second >= 0)
      .sort((a, b) => b.second - a.second)
      .slice(0, 100)
      .map(
        (s): SlotState => ({
          shard: s.shard,
          second: s.second,
          remaining: s.second >= second ? s.remaining : 0,
          ranges: s.second >= second ? s.queue.length + (s.next <= s.last ? 1 : 0) : 0,
          batchSize: s.batch,
          refillInFlight: s.refill !== undefined,
          usedUp: s.usedUpSecond >= s.second,
          floorSecond: s.floorSecond,
        }),
      );
    let status: RedisSequenceState["status"];
    if (this.closed) status = "closed";
    else if (this.down)
      status = this.o.whenRedisDown === "random" ? "random-fallback" : "unavailable";
    else if (!this.started) status = "starting";
    else if (this.fence >= second) status = "fenced";
    else status = "ready";
    return {
      namespace: this.o.namespace,
      hashTag: this.keys.hashTag,
      keyPrefix: this.o.keyPrefix,
      layout: this.layout.name,
      sequenceScope: this.o.sequenceScope,
      timeSource: this.o.timeSource,
      status,
      currentSecond: second,
      redis: {
        topology: this.link.topology,
        where: this.link.description,
        reachable: this.started && !this.down,
        lastError: this.down?.error.message,
        downSinceMs: this.down?.sinceMs,
        clockOffsetMs: this.observedOffsetMs,
        lastRoundTripMicros: this.lastRoundTripMicros,
        evictionPolicies: this.evictionPolicies,
        runId: this.runId,
      },
      fence:
        this.fence < 0
          ? undefined
          : {
              untilSecond: this.fence,
              until: new Date(this.fence * 1000 + 999).toISOString(),
              active: this.fence >= second,
            },
      slots,
      stats: { ...this.stats, refused: { ...this.stats.refused } },
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

  // ---- the cache ----

  private slotFor(shard: number): Slot {
    if (!Number.isInteger(shard) || shard < 0 || shard > this.maxShard) {
      throw argumentError(
        COMPONENT,
        "shard",
        shard,
        `an integer from 0 to ${this.maxShard} (layout ${this.layout.name})`,
      );
    }
    if (this.namespaceSlot) return this.namespaceSlot;
    let slot = this.slots[shard];
    if (!slot) {
      slot = new Slot(shard, this.o.minBatchSize);
      this.slots[shard] = slot;
    }
    return slot;
  }

  /**
   * Takes one sequence for `second`, or -1. A slot whose second is ahead of the clock (the clock
   * stepped back a little, or the Redis offset moved) still serves: its ids are unique, and Redis
   * granted that second within the allowed skew.
   */
  private take(slot: Slot, second: number): number {
    if (slot.second < second) return -1;
    if (slot.next > slot.last) {
      const range = slot.queue.shift();
      if (!range) return -1;
      slot.next = range.first;
      slot.last = range.last;
    }
    slot.remaining--;
    this.stats.ids++;
    if (slot.remaining * 4 < slot.batch && slot.refill === undefined) this.kick(slot, slot.second);
    return slot.next++;
  }

  /** Takes up to `max` consecutive sequences of the current range; returns how many. */
  private takeRun(slot: Slot, second: number, max: number): number {
    if (slot.second < second) return 0;
    if (slot.next > slot.last) {
      const range = slot.queue.shift();
      if (!range) return 0;
      slot.next = range.first;
      slot.last = range.last;
    }
    const taken = Math.min(max, slot.last - slot.next + 1);
    slot.next += taken;
    slot.remaining -= taken;
    this.stats.ids += taken;
    return taken;
  }

  /** Starts a background refill when one may help and none is in flight. */
  private kick(slot: Slot, second: number): void {
    if (slot.refill || this.closed || !this.started) return;
    if (this.fence >= second || slot.usedUpSecond >= second || slot.floorSecond > second) return;
    if (this.down && performance.now() < this.down.retryAt) return;
    this.refill(slot, second).catch(() => {
      // Recorded in this.down or the stats; the next caller that needs a range sees it.
    });
  }

  private compose(second: number, shard: number, sequence: number): bigint {
    if (second !== this.baseSecond) {
      const ticks = second - this.epochSecond;
      if (ticks < 0 || ticks > this.layout.maxTicks) throw this.outOfLayout(second);
      this.base = BigInt(ticks) << this.timestampShift;
      this.baseSecond = second;
    }
    let bits = this.shardBits[shard];
    if (bits === undefined) {
      bits = BigInt(shard) << BigInt(this.layout.workerShift);
      this.shardBits[shard] = bits;
    }
    return this.base | bits | BigInt(sequence);
  }

  // ---- the slow path ----

  private async nextIdSlow(shard: number): Promise<bigint> {
    const slot = this.slotFor(shard);
    const deadline = performance.now() + this.o.maxWaitMs;
    let fruitless = 0;
    for (;;) {
      if (this.closed) throw this.closedError();
      try {
        if (!this.started) await this.start();
      } catch (error) {
        if (this.o.whenRedisDown === "random" && isLeafError(error, ErrorCodes.UNAVAILABLE)) {
          return this.randomId(slot, shard, Math.floor(this.o.clock.now() / 1000));
        }
        throw error;
      }
      const second = this.currentSecond();
      const sequence = this.take(slot, second);
      if (sequence >= 0) return this.compose(slot.second, shard, sequence);
      if (this.fence >= second) {
        await this.waitForSecond(this.fence + 1, deadline, () => this.fencedError(second));
        continue;
      }
      if (slot.floorSecond > second) {
        await this.waitForSecond(slot.floorSecond, deadline, () => this.behindError(second, slot));
        continue;
      }
      if (slot.usedUpSecond >= second) {
        await this.waitForSecond(slot.usedUpSecond + 1, deadline, () =>
          this.exhaustedError(slot.usedUpSecond),
        );
        continue;
      }
      if (this.down && performance.now() < this.down.retryAt) {
        if (this.o.whenRedisDown === "random" && this.down.error.code === ErrorCodes.UNAVAILABLE) {
          return this.randomId(slot, shard, second);
        }
        throw this.stillDownError();
      }
      if (fruitless > MAX_FRUITLESS_REFILLS) {
        throw new LeafError({
          component: COMPONENT,
          code: ErrorCodes.UNAVAILABLE,
          message:
            `no range obtained for second ${second} after ${MAX_FRUITLESS_REFILLS} round trips to ` +
            `${this.link.description}; the clock may be jumping. Check the clock and Redis TIME`,
          details: { second, namespace: this.o.namespace },
        });
      }
      try {
        const ranges = this.stats.ranges;
        await this.refill(slot, second);
        // Ranges taken by other callers first still count as progress; only empty answers do not.
        if (this.stats.ranges === ranges) fruitless++;
      } catch (error) {
        if (this.o.whenRedisDown === "random" && isLeafError(error, ErrorCodes.UNAVAILABLE)) {
          return this.randomId(slot, shard, second);
        }
        throw error;
      }
    }
  }

  /** Waits until the clock reaches `second`, or throws `failure()` when that is past the deadline. */
  private async waitForSecond(
    second: number,
    deadline: number,
    failure: () => LeafError,
  ): Promise<void> {
    const waitMs = second * 1000 - this.nowMs();
    if (waitMs <= 0) return;
    if (performance.now() + waitMs > deadline) throw failure();
    this.stats.waits++;
    await delay(Math.min(Math.ceil(waitMs), 1000));
  }

  /** One round trip for `slot` at a time: callers that come meanwhile share it. */
  private refill(slot: Slot, second: number): Promise<void> {
    if (slot.refill) return slot.refill;
    const pending = this.allocate(slot, second).finally(() => {
      slot.refill = undefined;
    });
    slot.refill = pending;
    return pending;
  }

  private async allocate(slot: Slot, second: number): Promise<void> {
    if (slot.second === second && slot.refillsThisSecond > 0) {
      // Demand outgrew the range within this second: take more per round trip.
      slot.batch = Math.min(slot.batch * 2, this.o.batchSize);
    } else if (slot.second >= 0 && slot.second < second && slot.remaining * 2 > slot.batch) {
      // Most of the last range went unused: take less, leave the shared space to others.
      slot.batch = Math.max(Math.floor(slot.batch / 2), this.o.minBatchSize);
    }
    const keys = [
      this.keys.sequence(second, slot.shard),
      this.keys.lock(second, slot.shard),
      this.keys.settings(),
      this.keys.marker(),
    ];
    const args = [
      ...this.checkArgs(),
      second,
      this.maxSequence,
      slot.batch,
      this.o.keyTtlSeconds,
      this.o.lockMs,
      slot.shard === undefined ? "high_second" : `high_second:${slot.shard}`,
    ];
    const sentAt = this.o.clock.now();
    const started = performance.now();
    this.stats.roundTrips++;
    let reply: unknown;
    try {
      reply = await this.link.run(allocateScript, keys, args, this.o.refillTimeoutMs);
    } catch (error) {
      if (this.closed) throw this.closedError();
      this.onAllocationError(error, slot, second, sentAt);
      return;
    }
    this.lastRoundTripMicros = Math.round((performance.now() - started) * 1000);
    const values = Array.isArray(reply) ? reply.map(Number) : [];
    const [granted, first, last, redisMs, fence] = values;
    if (
      values.length !== 5 ||
      !values.every(Number.isSafeInteger) ||
      granted !== second ||
      first! < 0 ||
      last! < first! ||
      last! > this.maxSequence
    ) {
      const error = unavailable(
        this.link.description,
        new Error(`unexpected answer ${JSON.stringify(reply)}`),
        `allocating sequences for second ${second}`,
      );
      this.markDown(error);
      throw error;
    }
    this.reachable();
    this.observeTime(redisMs!, sentAt);
    this.observeFence(fence!);
    this.stats.ranges++;
    this.everGranted = true;
    this.store(slot, granted, first!, last!);
  }

  private store(slot: Slot, second: number, first: number, last: number): void {
    if (second === slot.second) {
      slot.queue.push({ first, last });
      slot.refillsThisSecond++;
    } else if (second > slot.second || second === this.currentSecond()) {
      slot.second = second;
      slot.next = first;
      slot.last = last;
      slot.queue = [];
      slot.remaining = 0;
      slot.grants = [];
      slot.refillsThisSecond = 1;
    } else {
      return; // A range of a second the cache has moved past: never used.
    }
    slot.remaining += last - first + 1;
    slot.grants.push({ first, last });
    if (last >= this.maxSequence) slot.usedUpSecond = Math.max(slot.usedUpSecond, second);
  }

  private onAllocationError(error: unknown, slot: Slot, second: number, sentAt: number): void {
    const answered = error instanceof Error && !(error instanceof RedisTimeoutError);
    const recorded = answered ? parseSettingsRefusal(error.message) : undefined;
    if (recorded) {
      this.reachable();
      throw this.settingsError(recorded);
    }
    const refusal = answered ? parseRefusal(error.message) : undefined;
    if (!refusal) {
      const failure = unavailable(
        this.link.description,
        error,
        `allocating sequences for second ${second} in namespace ${this.o.namespace}`,
        { namespace: this.o.namespace, second },
      );
      this.markDown(failure);
      throw failure;
    }
    this.reachable();
    this.observeTime(refusal.redisMs, sentAt);
    switch (refusal.kind) {
      case "skew":
        this.stats.refused.skew++;
        // With Redis TIME the offset was just corrected: the caller asks again.
        if (!this.redisTime) throw this.skewError(second, refusal.redisMs);
        return;
      case "fenced":
        this.stats.refused.fenced++;
        this.observeFence(refusal.fence);
        return;
      case "locked":
      case "exhausted":
        this.stats.refused[refusal.kind]++;
        slot.usedUpSecond = Math.max(slot.usedUpSecond, refusal.second);
        return;
      case "behind":
        this.stats.refused.behind++;
        this.onBehind(slot, second, refusal.floor, refusal.highWater, refusal.redisMs);
        return;
    }
  }

  /**
   * Redis refused `second` because it is not above the highest second it ever granted the counter
   * and the counter is gone: Redis TIME went back (past the counter's expiry) to seconds whose
   * sequences were handed out already. Nothing below `floor` is asked for again.
   */
  private onBehind(
    slot: Slot,
    second: number,
    floor: number,
    highWater: number,
    redisMs: number,
  ): void {
    if (floor <= slot.floorSecond) return;
    slot.floorSecond = floor;
    // A second up to maxClockSkewMs ahead of Redis TIME may be granted, so only a Redis TIME
    // further behind the high-water second shows that Redis's clock went back (else this client's
    // clock lags its peers', and the short wait for the floor is all there is to it).
    if (redisMs >= highWater * 1000 - this.o.maxClockSkewMs) return;
    this.o.onWarning({
      type: "clock-behind",
      message:
        `[leaf] [${COMPONENT}] Redis at ${this.link.description} refused second ` +
        `${new Date(second * 1000).toISOString()} of namespace ${this.o.namespace}: Redis TIME ` +
        `(${new Date(redisMs).toISOString()}) is back at or below the highest second it already ` +
        `granted (${new Date(highWater * 1000).toISOString()}) and that second's counter is gone, ` +
        "so its sequences could repeat. Ids are refused until Redis TIME passes " +
        `${new Date(floor * 1000).toISOString()}; check the clock of the Redis host (NTP)`,
      details: {
        namespace: this.o.namespace,
        shard: slot.shard,
        second,
        highWaterSecond: highWater,
        floorSecond: floor,
        redisMs,
      },
    });
  }

  /** The arguments both scripts start with: fence sizes and the settings of the namespace. */
  private checkArgs(): (string | number)[] {
    return [
      this.o.maxClockSkewMs,
      this.o.fenceMarginMs,
      this.settings.keyPrefix,
      this.settings.sequenceScope,
      this.settings.layout,
    ];
  }

  // ---- time, fence, availability ----

  private nowMs(): number {
    return this.o.clock.now() + (this.redisTime ? this.offsetMs : 0);
  }

  private currentSecond(): number {
    return Math.floor(this.nowMs() / 1000);
  }

  /** Notes Redis TIME from an answer; with timeSource "redis" it becomes the clock. */
  private observeTime(redisMs: number, sentAt: number): void {
    const receivedAt = this.o.clock.now();
    const offset = Math.round(redisMs - (sentAt + receivedAt) / 2);
    this.observedOffsetMs = offset;
    if (this.redisTime) this.offsetMs = offset;
  }

  private observeFence(fence: number): void {
    if (fence <= this.fence) return;
    const second = this.currentSecond();
    if (this.everGranted && fence >= second) {
      this.o.onWarning({
        type: "fenced",
        message:
          `[leaf] [${COMPONENT}] Redis at ${this.link.description} restarted, failed over or lost ` +
          `its data (namespace ${this.o.namespace}): sequences handed out before may be handed out ` +
          `again, so seconds up to ${new Date(fence * 1000 + 999).toISOString()} are refused`,
        details: { namespace: this.o.namespace, fenceSecond: fence },
      });
    }
    this.fence = fence;
  }

  private reachable(): void {
    this.down = undefined;
  }

  private markDown(error: LeafError): void {
    this.stats.failures++;
    if (!this.down) {
      this.down = {
        sinceMs: Date.now(),
        attempts: 0,
        retryAt: 0,
        error,
        randomWarned: false,
      };
      this.o.onWarning({
        type: "redis-unavailable",
        message: error.message,
        details: { namespace: this.o.namespace, redis: this.link.description },
      });
    }
    this.down.error = error;
    this.down.retryAt =
      performance.now() + backoffDelay(this.down.attempts++, { initialMs: 100, maxMs: 2000 });
  }

  private randomId(slot: Slot, shard: number, second: number): bigint {
    if (this.down && !this.down.randomWarned) {
      this.down.randomWarned = true;
      this.o.onWarning({
        type: "random-fallback",
        message:
          `[leaf] [${COMPONENT}] Redis at ${this.link.description} is unreachable and no range is ` +
          `cached: handing out RANDOM sequences (whenRedisDown "random") in namespace ` +
          `${this.o.namespace}. They are unique within this process only: another process, or a ` +
          "range Redis hands out in the same second, may produce the same id",
        details: { namespace: this.o.namespace },
      });
    }
    if (second !== this.randomSecond) {
      this.randomSecond = second;
      this.randomUsed.clear();
    }
    const grants = slot.second === second ? slot.grants : [];
    for (let attempt = 0; attempt < 64; attempt++) {
      const sequence = Math.floor(this.o.random() * (this.maxSequence + 1));
      if (grants.some((g) => sequence >= g.first && sequence <= g.last)) continue;
      const id = this.compose(second, shard, sequence);
      if (this.randomUsed.has(id)) continue;
      this.randomUsed.add(id);
      this.stats.randomIds++;
      return id;
    }
    throw this.exhaustedError(second);
  }

  private async doStart(): Promise<void> {
    const sentAt = this.o.clock.now();
    this.stats.roundTrips++;
    let reply: unknown;
    try {
      await this.link.connect(this.o.connectTimeoutMs);
      reply = await this.link.run(
        probeScript,
        [this.keys.settings(), this.keys.marker()],
        this.checkArgs(),
        this.o.connectTimeoutMs,
      );
    } catch (error) {
      const recorded =
        error instanceof Error && !(error instanceof RedisTimeoutError)
          ? parseSettingsRefusal(error.message)
          : undefined;
      if (recorded) throw this.settingsError(recorded);
      const failure = unavailable(this.link.description, error, "starting", {
        namespace: this.o.namespace,
      });
      this.markDown(failure);
      throw failure;
    }
    const [redisMs, fence, runId] = Array.isArray(reply) ? reply : [];
    this.reachable();
    this.runId = String(runId);
    this.observeTime(Number(redisMs), sentAt);
    this.observeFence(Number(fence));
    this.started = true;
    this.evictionPolicies = await this.link.evictionPolicies(this.o.connectTimeoutMs);
    const risky = this.evictionPolicies?.filter((p) => p !== "noeviction") ?? [];
    if (risky.length > 0) {
      this.o.onWarning({
        type: "eviction-policy",
        message:
          `[leaf] [${COMPONENT}] Redis at ${this.link.description} has maxmemory-policy ` +
          `${risky.join(", ")}: when memory fills it may evict a sequence counter and then hand ` +
          "out the same sequences again. Set maxmemory-policy noeviction for this Redis",
        details: { policies: this.evictionPolicies },
      });
    }
    const offset = this.observedOffsetMs ?? 0;
    if (!this.redisTime && Math.abs(offset) > this.o.maxClockSkewMs) {
      this.o.onWarning({
        type: "clock-skew",
        message: this.skewError(this.currentSecond(), Number(redisMs)).message,
        details: { offsetMs: offset, maxClockSkewMs: this.o.maxClockSkewMs },
      });
    }
    const left = this.layout.lastInstantMs - this.nowMs();
    if (left < YEAR_MS) {
      this.o.onWarning({
        type: "layout-expiry",
        message:
          `[leaf] [${COMPONENT}] layout ${this.layout.name} runs out of time on ` +
          `${new Date(this.layout.lastInstantMs).toISOString()}; after that no id can be issued. ` +
          "Plan a move to a layout with a later epoch",
        details: { lastInstantMs: this.layout.lastInstantMs },
      });
    }
  }

  // ---- errors ----

  private closedError(): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CLOSED,
      message: `sequence for namespace ${this.o.namespace} is closed: create a new one`,
    });
  }

  private stillDownError(): LeafError {
    const down = this.down!;
    return new LeafError({
      component: COMPONENT,
      code: down.error.code,
      message:
        `Redis at ${this.link.description} has been unreachable since ` +
        `${new Date(down.sinceMs).toISOString()} and the cached ranges are used up; ` +
        `retrying in ${Math.max(0, Math.round(down.retryAt - performance.now()))} ms. ` +
        `Last failure: ${down.error.details.reason ?? down.error.message}`,
      details: { ...down.error.details, downSinceMs: down.sinceMs },
      cause: down.error,
    });
  }

  private fencedError(second: number): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message:
        `Redis at ${this.link.description} refuses second ${second} of namespace ` +
        `${this.o.namespace} until ${new Date(this.fence * 1000 + 999).toISOString()}: it restarted, ` +
        "failed over or lost its data (or the namespace is new there), and sequences handed out " +
        `before could repeat. The wait is longer than maxWaitMs (${this.o.maxWaitMs}); retry later`,
      details: { second, fenceSecond: this.fence, namespace: this.o.namespace },
    });
  }

  private behindError(second: number, slot: Slot): LeafError {
    const floor = slot.floorSecond;
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CLOCK_BEHIND,
      message:
        `Redis at ${this.link.description} refuses second ${new Date(second * 1000).toISOString()} ` +
        `of namespace ${this.o.namespace}: the second is not above the highest second already ` +
        "granted and its counter is gone (Redis's clock went back, and the counter expired), so " +
        `its sequences could repeat. Ids resume at ` +
        `${new Date(floor * 1000).toISOString()}, further away than maxWaitMs ` +
        `(${this.o.maxWaitMs} ms). Fix the clock of the Redis host (NTP); retry later`,
      details: { second, floorSecond: floor, namespace: this.o.namespace, shard: slot.shard },
    });
  }

  private settingsError(recorded: RecordedSettings): LeafError {
    const names: Record<keyof RecordedSettings, string> = {
      keyPrefix: "keyPrefix",
      sequenceScope: "sequenceScope",
      layout: "layout",
    };
    const show = (s: RecordedSettings) =>
      `keyPrefix ${JSON.stringify(s.keyPrefix)}, sequenceScope ${JSON.stringify(s.sequenceScope)}, ` +
      `layout ${JSON.stringify(s.layout)}`;
    const differing = (Object.keys(names) as (keyof RecordedSettings)[]).filter(
      (key) => recorded[key] !== this.settings[key],
    );
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.INVALID_CONFIG,
      message:
        `namespace ${this.o.namespace} in Redis at ${this.link.description} is used with other ` +
        `settings: its settings marker ${this.keys.settings()} records ${show(recorded)}; this ` +
        `client has ${show(this.settings)}. Clients of one namespace with a different ` +
        `${differing.join(", ") || "setting"} hand out the same ids, so this one refuses to ` +
        "serve. Use the recorded settings, or another namespace. To change a namespace's " +
        "keyPrefix or sequenceScope, stop every client of it, wait keyTtlSeconds, then delete " +
        "the settings marker; a layout change needs a new namespace (ids of two layouts collide)",
      details: {
        key: differing[0] ?? "settings",
        namespace: this.o.namespace,
        settingsKey: this.keys.settings(),
        recorded: show(recorded),
        configured: show(this.settings),
      },
    });
  }

  private exhaustedError(second: number): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.SEQUENCE_EXHAUSTED,
      message:
        `the ${this.maxSequence + 1} sequences of second ${new Date(second * 1000).toISOString()} ` +
        `are used up in namespace ${this.o.namespace}${this.o.sequenceScope === "shard" ? " for this shard" : ""}` +
        ` and the next second is further away than maxWaitMs (${this.o.maxWaitMs} ms); retry, or ` +
        'spread the load (sequenceScope "shard", more namespaces)',
      details: { second, namespace: this.o.namespace, capacity: this.maxSequence + 1 },
    });
  }

  private skewError(second: number, redisMs: number): LeafError {
    const localMs = second * 1000;
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CLOCK_SKEW,
      message:
        `this machine's clock (second ${new Date(localMs).toISOString()}) is more than ` +
        `${this.o.maxClockSkewMs} ms from Redis TIME (${new Date(redisMs).toISOString()}): Redis ` +
        'refuses the second. Fix the clock (NTP), or use timeSource "redis"',
      details: { second, redisMs, maxClockSkewMs: this.o.maxClockSkewMs },
    });
  }

  private outOfLayout(second: number): LeafError {
    const before = second < this.epochSecond;
    return new LeafError({
      component: COMPONENT,
      code: before ? ErrorCodes.CLOCK_BEHIND : ErrorCodes.LAYOUT_EXHAUSTED,
      message: before
        ? `the clock reads ${new Date(second * 1000).toISOString()}, before the epoch of layout ` +
          `${this.layout.name} (${new Date(this.layout.epoch).toISOString()}); fix the clock`
        : `layout ${this.layout.name} cannot represent ${new Date(second * 1000).toISOString()}: ` +
          `its last instant was ${new Date(this.layout.lastInstantMs).toISOString()}. Move to a ` +
          "layout with a later epoch; no id is issued (never a wrapped one)",
      details: { second, epoch: this.layout.epoch, lastInstantMs: this.layout.lastInstantMs },
    });
  }
}

/** How the settings marker records a layout: what decides the meaning of an id's bits. */
function layoutSetting(layout: Layout): string {
  return (
    `${layout.timestampBits}+${layout.workerBits}+${layout.sequenceBits} bits, unit ` +
    `${layout.unitMillis} ms, epoch ${new Date(layout.epoch).toISOString()}`
  );
}

/**
 * Creates a sequence and checks Redis: connects (when given a URL), reads Redis TIME and the
 * namespace's fence, and warns about a risky eviction policy.
 * @throws LeafError INVALID_CONFIG for a bad option, UNAVAILABLE when Redis does not answer.
 */
export async function createRedisSequence(options: RedisSequenceOptions): Promise<RedisSequence> {
  const sequence = new RedisSequence(options);
  try {
    await sequence.start();
  } catch (error) {
    await sequence.close();
    throw error;
  }
  return sequence;
}
