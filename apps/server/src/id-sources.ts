// The id sources as the HTTP layer sees them: each mode's ids, or the error that says why there are
// none (disabled here, still starting, shutting down). Counting issued ids happens here too.
import { ErrorCodes, isLeafError, LeafCodes, LeafError } from "@leaf/core";
import type { WorkerLink } from "./cluster-worker";
import type { ServerConfig } from "./config";
import { HttpCodes, HttpError } from "./http-errors";
import type { ServerMetrics, SnowflakeTally, Tally } from "./metrics";
import type { LeafServices, RedisSequenceMode, SegmentMode, SnowflakeMode } from "./service-types";

/** What the routes share: the configuration, the metrics and the running services. */
export interface AppContext {
  config: ServerConfig;
  metrics: ServerMetrics;
  /** Set once every mode has started. */
  services: LeafServices | undefined;
  /**
   * "starting" until the services run; "draining" from SIGTERM on for server.drainMs (readiness
   * is false, requests are still answered, each with `Connection: close`); then "stopping" (the
   * port closes, each open connection gets its last answer, then the modes close).
   */
  state: "starting" | "running" | "draining" | "stopping";
  /** While draining: ms since 1970 when the drain ends and the port closes. */
  drainEndsAt?: number;
  /** Set once the listening socket is closed: every answer carries `Connection: close`. */
  portClosed?: boolean;
  /** Set once the modes are closing: every request is answered 503 SHUTTING_DOWN. */
  modesClosing?: boolean;
  /** ms since 1970 when the server started listening. */
  startedAt: number;
  version: string;
  /**
   * Set in a worker process of a server with several (server.workers): its siblings, its primary.
   */
  workers?: WorkerLink;
}

/** The modes, as named in messages, metrics and the config's keys. */
export type Mode = "segment" | "snowflake" | "redisSequence";

const MODE_TEXT: Record<Mode, { name: string; key: string }> = {
  segment: { name: "segment mode", key: "segment.enabled (leaf.segment.enable)" },
  snowflake: { name: "snowflake mode", key: "snowflake.enabled (leaf.snowflake.enable)" },
  redisSequence: { name: "the redis sequence", key: "redisSequence.enabled / redisSequence.url" },
};

/** Serves ids from the running modes, with the errors a caller can act on. */
export class IdSources {
  private readonly segmentTallies = new Map<string, Tally>();
  private readonly snowflakeTally: SnowflakeTally;
  private readonly redisTally: Tally | undefined;

  constructor(private readonly ctx: AppContext) {
    this.snowflakeTally = ctx.metrics.snowflakeTally(ctx.config.snowflake?.layout);
    this.redisTally = ctx.config.redisSequence
      ? ctx.metrics.tally("redisSequence", ctx.config.redisSequence.namespace)
      : undefined;
  }

  /** The running segment mode, or the reason there is none. */
  segment(): SegmentMode {
    const mode = this.ctx.services?.segment;
    if (mode !== undefined && this.ctx.state !== "starting") return mode;
    throw this.unavailable("segment", this.ctx.config.segment !== undefined);
  }

  /** The running snowflake mode, or the reason there is none. */
  snowflake(): SnowflakeMode {
    const mode = this.ctx.services?.snowflake;
    if (mode !== undefined && this.ctx.state !== "starting") return mode;
    throw this.unavailable("snowflake", this.ctx.config.snowflake !== undefined);
  }

  /** The running redis sequence, or the reason there is none. */
  redisSequence(): RedisSequenceMode {
    const mode = this.ctx.services?.redisSequence;
    if (mode !== undefined && this.ctx.state !== "starting") return mode;
    throw this.unavailable("redisSequence", this.ctx.config.redisSequence !== undefined);
  }

  /**
   * One segment id: synchronously from the buffer, or a promise when the buffer must wait for a
   * range (both used up, or the tag's first range still loading).
   */
  segmentId(tag: string): bigint | Promise<bigint> {
    const { generator } = this.segment();
    let id: bigint;
    try {
      id = generator.nextIdSync(tag);
    } catch (error) {
      if (
        isLeafError(error) &&
        (error.code === ErrorCodes.SEGMENTS_EXHAUSTED ||
          error.code === ErrorCodes.NOT_INITIALIZED) &&
        generator.status().state === "running"
      ) {
        return generator.nextId(tag).then((waited) => {
          this.countSegment(tag, 1);
          return waited;
        });
      }
      throw error;
    }
    this.countSegment(tag, 1);
    return id;
  }

  /**
   * One segment id of `tag` if there is one at hand at once; undefined instead of waiting or
   * throwing (no id is taken then: {@link segmentId} says why, or waits).
   */
  segmentIdNow(tag: string): bigint | undefined {
    const mode = this.ctx.services?.segment;
    if (mode === undefined || this.ctx.state === "starting") return undefined;
    let id: bigint;
    try {
      id = mode.generator.nextIdSync(tag);
    } catch {
      return undefined;
    }
    this.countSegment(tag, 1);
    return id;
  }

  /** `count` consecutive segment ids of `tag`. */
  async segmentIds(tag: string, count: number): Promise<bigint[]> {
    const ids = await this.segment().generator.nextIds(tag, count);
    this.countSegment(tag, count);
    return ids;
  }

  /** One snowflake id. */
  snowflakeId(): bigint {
    const { worker } = this.snowflake();
    this.snowflakeTally.before();
    const id = worker.nextId();
    this.snowflakeTally.issued(id);
    return id;
  }

  /**
   * `count` snowflake ids, in increasing order, made in chunks of one tick's sequence space with a
   * turn of the event loop between them, so that lease renewals and fencing run during a batch.
   */
  async snowflakeIds(count: number): Promise<bigint[]> {
    const { worker } = this.snowflake();
    this.snowflakeTally.before();
    const ids = await worker.nextIdsAsync(count);
    this.snowflakeTally.issuedAll(ids);
    return ids;
  }

  /** One redis sequence id for `shard`. */
  redisId(shard: number): bigint | Promise<bigint> {
    const { sequence } = this.redisSequence();
    const id = sequence.tryNextIdSync(shard);
    if (id !== undefined) {
      this.redisTally!.n++;
      return id;
    }
    return sequence.nextId(shard).then((waited) => {
      this.redisTally!.n++;
      return waited;
    });
  }

  /** `count` redis sequence ids for `shard`. */
  async redisIds(shard: number, count: number): Promise<bigint[]> {
    const ids = await this.redisSequence().sequence.nextIds(shard, count);
    this.redisTally!.n += count;
    return ids;
  }

  private countSegment(tag: string, n: number): void {
    let tally = this.segmentTallies.get(tag);
    if (tally === undefined) {
      tally = this.ctx.metrics.tally("segment", tag);
      this.segmentTallies.set(tag, tally);
    }
    tally.n += n;
  }

  private unavailable(mode: Mode, enabled: boolean): Error {
    const { name, key } = MODE_TEXT[mode];
    if (!enabled) {
      return new HttpError(
        404,
        HttpCodes.MODE_DISABLED,
        `[leaf] [server] ${name} is disabled on this server (${key}); enable it, or ask a server that serves it. No id is issued (Java Leaf answered 0 here)`,
        { mode },
      );
    }
    if (this.ctx.state === "stopping") {
      return new HttpError(
        503,
        HttpCodes.SHUTTING_DOWN,
        `[leaf] [server] the server is shutting down; ask another node`,
      );
    }
    return new LeafError({
      component: "server",
      code: ErrorCodes.NOT_INITIALIZED,
      leafCode: mode === "segment" ? LeafCodes.SEGMENT_NOT_INITIALIZED : undefined,
      message: `${name} is still starting on this server; retry shortly (see /health/ready)`,
      details: { mode },
    });
  }
}
