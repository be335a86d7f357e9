// Every error a sequence throws, worded in one place: what happened, the values seen, what to do.
import { ErrorCodes, type Layout, LeafError } from "@leaf/core";
import { isRedisWriteRefusal } from "@leaf/redis-support";
import type { SequenceKeys } from "./keys";
import type { RecordedSettings } from "./lua-scripts";
import type { ResolvedOptions } from "./options";

const COMPONENT = "redis-sequence";

/** How the settings marker records a layout: what decides the meaning of an id's bits. */
export function layoutSetting(layout: Layout): string {
  return (
    `${layout.timestampBits}+${layout.workerBits}+${layout.sequenceBits} bits, unit ` +
    `${layout.unitMillis} ms, epoch ${new Date(layout.epoch).toISOString()}`
  );
}

/** The settings every client of a namespace must share, as its settings marker records them. */
export function namespaceSettings(o: ResolvedOptions): RecordedSettings {
  return {
    keyPrefix: o.keyPrefix,
    sequenceScope: o.sequenceScope,
    layout: layoutSetting(o.layout),
  };
}

/** The errors of one sequence, each naming its namespace and where Redis is. */
export class SequenceErrors {
  constructor(
    private readonly o: ResolvedOptions,
    /** Where Redis is, without passwords. */
    private readonly where: string,
    private readonly keys: SequenceKeys,
    private readonly settings: RecordedSettings,
  ) {}

  /** CLOSED: a call after close(). */
  closed(): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CLOSED,
      message: `sequence for namespace ${this.o.namespace} is closed: create a new one`,
    });
  }

  /**
   * The last failure's code: Redis is down since `sinceMs` and the next try is `retryInMs` away.
   */
  stillDown(sinceMs: number, retryInMs: number, last: LeafError): LeafError {
    const reason = String(last.details.reason ?? last.message);
    // A master cut off from its replicas (NOREPLICAS), a replica: Redis answers, and refuses.
    const state = isRedisWriteRefusal(reason) ? "has refused writes" : "has been unreachable";
    return new LeafError({
      component: COMPONENT,
      code: last.code,
      message:
        `Redis at ${this.where} ${state} since ` +
        `${new Date(sinceMs).toISOString()} and the cached ranges are used up; ` +
        `retrying in ${Math.max(0, Math.round(retryInMs))} ms. ` +
        `Last failure: ${reason}`,
      details: { ...last.details, downSinceMs: sinceMs },
      cause: last,
    });
  }

  /** UNAVAILABLE: Redis fences `second` (up to `fence`) for longer than maxWaitMs. */
  fenced(second: number, fence: number): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message:
        `Redis at ${this.where} refuses second ${second} of namespace ` +
        `${this.o.namespace} until ${new Date(fence * 1000 + 999).toISOString()}: it restarted, ` +
        "failed over or lost its data (or the namespace is new there), and sequences handed out " +
        `before could repeat. The wait is longer than maxWaitMs (${this.o.maxWaitMs}); retry later`,
      details: { second, fenceSecond: fence, namespace: this.o.namespace },
    });
  }

  /** CLOCK_BEHIND: Redis's clock went back and the counter's floor is beyond maxWaitMs. */
  behind(second: number, floor: number, shard: number | undefined): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CLOCK_BEHIND,
      message:
        `Redis at ${this.where} refuses second ${new Date(second * 1000).toISOString()} ` +
        `of namespace ${this.o.namespace}: the second is not above the highest second already ` +
        "granted and its counter is gone (Redis's clock went back, and the counter expired), so " +
        `its sequences could repeat. Ids resume at ` +
        `${new Date(floor * 1000).toISOString()}, further away than maxWaitMs ` +
        `(${this.o.maxWaitMs} ms). Fix the clock of the Redis host (NTP); retry later`,
      details: { second, floorSecond: floor, namespace: this.o.namespace, shard },
    });
  }

  /** INVALID_CONFIG: the settings marker records other settings than this client's. */
  settingsDiffer(recorded: RecordedSettings): LeafError {
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
        `namespace ${this.o.namespace} in Redis at ${this.where} is used with other ` +
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

  /** SEQUENCE_EXHAUSTED: `second` is used up and the next one is beyond maxWaitMs. */
  exhausted(second: number): LeafError {
    const capacity = this.o.layout.maxSequence + 1;
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.SEQUENCE_EXHAUSTED,
      message:
        `the ${capacity} sequences of second ${new Date(second * 1000).toISOString()} ` +
        `are used up in namespace ${this.o.namespace}${this.o.sequenceScope === "shard" ? " for this shard" : ""}` +
        ` and the next second is further away than maxWaitMs (${this.o.maxWaitMs} ms); retry, or ` +
        'spread the load (sequenceScope "shard", more namespaces)',
      details: { second, namespace: this.o.namespace, capacity },
    });
  }

  /** CLOCK_SKEW: this machine's `second` is more than maxClockSkewMs from Redis TIME. */
  skew(second: number, redisMs: number): LeafError {
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

  /** UNAVAILABLE: round trips bring no range for `second` (a jumping clock). */
  noProgress(second: number, roundTrips: number): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message:
        `no range obtained for second ${second} after ${roundTrips} round trips to ` +
        `${this.where}; the clock may be jumping. Check the clock and Redis TIME`,
      details: { second, namespace: this.o.namespace },
    });
  }

  /** CLOCK_BEHIND before the layout's epoch, LAYOUT_EXHAUSTED past its last instant. */
  outOfLayout(second: number): LeafError {
    const layout = this.o.layout;
    const before = second < layout.epoch / 1000;
    return new LeafError({
      component: COMPONENT,
      code: before ? ErrorCodes.CLOCK_BEHIND : ErrorCodes.LAYOUT_EXHAUSTED,
      message: before
        ? `the clock reads ${new Date(second * 1000).toISOString()}, before the epoch of layout ` +
          `${layout.name} (${new Date(layout.epoch).toISOString()}); fix the clock`
        : `layout ${layout.name} cannot represent ${new Date(second * 1000).toISOString()}: ` +
          `its last instant was ${new Date(layout.lastInstantMs).toISOString()}. Move to a ` +
          "layout with a later epoch; no id is issued (never a wrapped one)",
      details: { second, epoch: layout.epoch, lastInstantMs: layout.lastInstantMs },
    });
  }
}
