// The round trips that take sequence ranges from Redis: the probe at start, one allocation per
// counter at a time, and what each refusal means (clock skew, a fence after a Redis restart, a
// used-up second, Redis's clock gone back below seconds already served).
import type { Layout } from "@leaf/core";
import { judgeRedisEviction, type RedisLink } from "@leaf/redis-support";
import { RedisTimeoutError, unavailable } from "./connection";
import type { SequenceErrors } from "./errors";
import type { Fallback } from "./fallback";
import type { SequenceKeys } from "./keys";
import {
  allocateScript,
  parseRefusal,
  parseSettingsRefusal,
  probeScript,
  type RecordedSettings,
} from "./lua-scripts";
import type { ResolvedOptions } from "./options";
import type { SequenceClock } from "./sequence-clock";
import type { Slot } from "./slot-cache";
import type { SequenceStats } from "./state";

const COMPONENT = "redis-sequence";
const YEAR_MS = 365 * 86_400_000;

/** What an allocator works with: the parts of the sequence it belongs to. */
export interface AllocatorParts {
  o: ResolvedOptions;
  link: RedisLink;
  keys: SequenceKeys;
  settings: RecordedSettings;
  clock: SequenceClock;
  stats: SequenceStats;
  fallback: Fallback;
  errors: SequenceErrors;
  /** True once the sequence is closed: a failed round trip then reports CLOSED. */
  isClosed: () => boolean;
}

/** Takes ranges from Redis for the slots of one sequence, and keeps what Redis told it. */
export class RangeAllocator {
  /** Seconds up to this one (Unix seconds) are refused after a Redis restart; -1 before a fence. */
  fence = -1;
  /** Redis process run id seen at start. */
  runId: string | undefined;
  /** maxmemory-policy of each master, when Redis allowed reading it. */
  evictionPolicies: string[] | undefined;
  /** Duration of the last allocation round trip in microseconds. */
  lastRoundTripMicros: number | undefined;
  private everGranted = false;
  private readonly o: ResolvedOptions;
  private readonly layout: Layout;

  constructor(private readonly parts: AllocatorParts) {
    this.o = parts.o;
    this.layout = parts.o.layout;
  }

  /**
   * Connects and runs the probe script: Redis TIME, the namespace's fence and the run id. Returns
   * Redis TIME in ms.
   * @throws LeafError INVALID_CONFIG when the settings marker differs, UNAVAILABLE otherwise.
   */
  async probe(): Promise<number> {
    const { link, keys, fallback } = this.parts;
    const sentAt = this.o.clock.now();
    this.parts.stats.roundTrips++;
    let reply: unknown;
    try {
      await link.connect(this.o.connectTimeoutMs);
      reply = await link.run(
        probeScript,
        [keys.settings(), keys.marker()],
        this.checkArgs(),
        this.o.connectTimeoutMs,
      );
    } catch (error) {
      const recorded =
        error instanceof Error && !(error instanceof RedisTimeoutError)
          ? parseSettingsRefusal(error.message)
          : undefined;
      if (recorded) throw this.parts.errors.settingsDiffer(recorded);
      const failure = unavailable(link.description, error, "starting", {
        namespace: this.o.namespace,
      });
      fallback.markDown(failure);
      throw failure;
    }
    const [redisMs, fence, runId] = Array.isArray(reply) ? reply : [];
    fallback.reachable();
    this.runId = String(runId);
    this.parts.clock.observe(Number(redisMs), sentAt);
    this.observeFence(Number(fence));
    return Number(redisMs);
  }

  /**
   * Warns about what makes ids risky or short-lived: an eviction policy that may drop a counter,
   * a clock further than maxClockSkewMs from Redis TIME (`redisMs`, from the probe), a layout
   * that runs out of time within a year.
   */
  async checkServer(redisMs: number): Promise<void> {
    const { link, clock } = this.parts;
    const servers = await link.evictionSettings(this.o.connectTimeoutMs);
    const policies = servers.map((s) => s.policy);
    this.evictionPolicies = policies.every((p) => p !== undefined) ? policies : undefined;
    // Counters have a TTL, so volatile-* policies may evict them too. An evicted counter's second
    // is refused by the high-water second (ids stop, not repeat): a warning, not a refusal.
    const finding = judgeRedisEviction(servers, {
      component: COMPONENT,
      where: link.description,
      keysExpire: true,
      consequence:
        "a sequence counter or the namespace's marker; the allocations of an evicted counter's " +
        "second are then refused (ids stop rather than repeat, see the README's Guarantees)",
    });
    if (finding) {
      this.o.onWarning({
        type: finding.kind === "evicting" ? "eviction-policy" : "eviction-policy-unknown",
        message: finding.message,
        details: { servers: finding.servers },
      });
    }
    const offset = clock.observedOffsetMs ?? 0;
    if (this.o.timeSource !== "redis" && Math.abs(offset) > this.o.maxClockSkewMs) {
      this.o.onWarning({
        type: "clock-skew",
        message: this.parts.errors.skew(clock.currentSecond(), redisMs).message,
        details: { offsetMs: offset, maxClockSkewMs: this.o.maxClockSkewMs },
      });
    }
    const left = this.layout.lastInstantMs - clock.nowMs();
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

  /** One round trip for `slot` at a time: callers that come meanwhile share it. */
  refill(slot: Slot, second: number): Promise<void> {
    if (slot.refill) return slot.refill;
    const pending = this.allocate(slot, second).finally(() => {
      slot.refill = undefined;
    });
    slot.refill = pending;
    return pending;
  }

  private async allocate(slot: Slot, second: number): Promise<void> {
    const { link, keys, stats, fallback } = this.parts;
    slot.resize(second, this.o.minBatchSize, this.o.batchSize);
    const scriptKeys = [
      keys.sequence(second, slot.shard),
      keys.lock(second, slot.shard),
      keys.settings(),
      keys.marker(),
    ];
    const args = [
      ...this.checkArgs(),
      second,
      this.layout.maxSequence,
      slot.batch,
      this.o.keyTtlSeconds,
      this.o.lockMs,
      slot.shard === undefined ? "high_second" : `high_second:${slot.shard}`,
    ];
    const sentAt = this.o.clock.now();
    const started = performance.now();
    stats.roundTrips++;
    let reply: unknown;
    try {
      reply = await link.run(allocateScript, scriptKeys, args, this.o.refillTimeoutMs);
    } catch (error) {
      if (this.parts.isClosed()) throw this.parts.errors.closed();
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
      last! > this.layout.maxSequence
    ) {
      const error = unavailable(
        link.description,
        new Error(`unexpected answer ${JSON.stringify(reply)}`),
        `allocating sequences for second ${second}`,
      );
      fallback.markDown(error);
      throw error;
    }
    fallback.reachable();
    this.parts.clock.observe(redisMs!, sentAt);
    this.observeFence(fence!);
    stats.ranges++;
    this.everGranted = true;
    const clock = this.parts.clock;
    slot.store(granted, first!, last!, () => clock.currentSecond(), this.layout.maxSequence);
  }

  private onAllocationError(error: unknown, slot: Slot, second: number, sentAt: number): void {
    const { link, stats, fallback, errors } = this.parts;
    const answered = error instanceof Error && !(error instanceof RedisTimeoutError);
    const recorded = answered ? parseSettingsRefusal(error.message) : undefined;
    if (recorded) {
      fallback.reachable();
      throw errors.settingsDiffer(recorded);
    }
    const refusal = answered ? parseRefusal(error.message) : undefined;
    if (!refusal) {
      const failure = unavailable(
        link.description,
        error,
        `allocating sequences for second ${second} in namespace ${this.o.namespace}`,
        { namespace: this.o.namespace, second },
      );
      fallback.markDown(failure);
      throw failure;
    }
    fallback.reachable();
    this.parts.clock.observe(refusal.redisMs, sentAt);
    switch (refusal.kind) {
      case "skew":
        stats.refused.skew++;
        // With Redis TIME the offset was just corrected: the caller asks again.
        if (this.o.timeSource !== "redis") throw errors.skew(second, refusal.redisMs);
        return;
      case "fenced":
        stats.refused.fenced++;
        this.observeFence(refusal.fence);
        return;
      case "locked":
      case "exhausted":
        stats.refused[refusal.kind]++;
        slot.usedUpSecond = Math.max(slot.usedUpSecond, refusal.second);
        return;
      case "behind":
        stats.refused.behind++;
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
        `[leaf] [${COMPONENT}] Redis at ${this.parts.link.description} refused second ` +
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

  private observeFence(fence: number): void {
    if (fence <= this.fence) return;
    const second = this.parts.clock.currentSecond();
    if (this.everGranted && fence >= second) {
      this.o.onWarning({
        type: "fenced",
        message:
          `[leaf] [${COMPONENT}] Redis at ${this.parts.link.description} restarted, failed over ` +
          `or lost its data (namespace ${this.o.namespace}): sequences handed out before may be ` +
          `handed out again, so seconds up to ${new Date(fence * 1000 + 999).toISOString()} are ` +
          "refused",
        details: { namespace: this.o.namespace, fenceSecond: fence },
      });
    }
    this.fence = fence;
  }

  /** The arguments both scripts start with: fence sizes and the settings of the namespace. */
  private checkArgs(): (string | number)[] {
    const { settings } = this.parts;
    return [
      this.o.maxClockSkewMs,
      this.o.fenceMarginMs,
      settings.keyPrefix,
      settings.sequenceScope,
      settings.layout,
    ];
  }
}
