// The snapshot a sequence gives a monitor page or a health check: its status, Redis as last seen,
// the fence, the cached counters and the counts of what it did.
import type { Slot } from "./slot-cache";

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

/** The counts a sequence keeps, shared by the parts that count. */
export type SequenceStats = RedisSequenceState["stats"];

/** Counts at zero, for a new sequence. */
export function emptyStats(): SequenceStats {
  return {
    ids: 0,
    randomIds: 0,
    roundTrips: 0,
    ranges: 0,
    failures: 0,
    refused: { skew: 0, fenced: 0, locked: 0, exhausted: 0, behind: 0 },
    waits: 0,
  };
}

/** A copy of the counts that later counting does not change. */
export function copyStats(stats: SequenceStats): SequenceStats {
  return { ...stats, refused: { ...stats.refused } };
}

/** The counters that hold ranges, the most recent second first, at most 100, as of `second`. */
export function slotStates(slots: readonly Slot[], second: number): SlotState[] {
  return slots
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
}

/** The fence (seconds up to `fence` refused) as of `second`; undefined before any fence. */
export function fenceState(fence: number, second: number): RedisSequenceState["fence"] {
  if (fence < 0) return undefined;
  return {
    untilSecond: fence,
    until: new Date(fence * 1000 + 999).toISOString(),
    active: fence >= second,
  };
}

/** The status word of a snapshot, from the facts that decide it, in order of precedence. */
export function sequenceStatus(facts: {
  closed: boolean;
  down: boolean;
  randomFallback: boolean;
  started: boolean;
  fenced: boolean;
}): RedisSequenceState["status"] {
  if (facts.closed) return "closed";
  if (facts.down) return facts.randomFallback ? "random-fallback" : "unavailable";
  if (!facts.started) return "starting";
  if (facts.fenced) return "fenced";
  return "ready";
}
