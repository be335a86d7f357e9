// The Redis segment store: one hash per tag and one marker per namespace, changed only by the Lua
// scripts in lua-scripts.ts, each one round trip (followed by WAIT in the same pipeline when the
// namespace waits for replicas). Ids cross between Redis, Lua and JS as decimal strings and are
// bigints here; no id is ever a JS or Lua number.
import { configError, ErrorCodes, LeafError } from "@leaf/core";
import {
  enforceRedisEviction,
  type LuaScript,
  type RedisEvictionWarning,
  RedisLink,
  redisCallError,
  TimeLimitError,
  withTimeLimit,
} from "@leaf/redis-support";
import type { NewTag, SegmentRange, SegmentStore, TagRecord } from "@leaf/segment";
import {
  checkStep,
  checkTag,
  closedError,
  floorOf,
  MAX_ID,
  normalizeNewTag,
  RangeFloors,
} from "@leaf/segment/adapter";
import type { Cluster, Redis } from "ioredis";
import {
  CREATE_NAMESPACE_SCRIPT,
  CREATE_TAG_SCRIPT,
  DELETE_TAG_SCRIPT,
  DESCRIBE_SCRIPT,
  GIVE_BACK_SCRIPT,
  INSPECT_SCRIPT,
  LIFT_FENCE_SCRIPT,
  TAKE_SCRIPT,
  UPDATE_STEP_SCRIPT,
} from "./lua-scripts";
import {
  COMPONENT,
  type RedisSegmentStoreOptions,
  type RedisStoreWarning,
  type ResolvedStoreOptions,
  resolveStoreOptions,
  type StoreKeys,
  storeKeys,
} from "./redis-store-options";
import { parseRefusal, type RefusalContext, refusalError } from "./refusals";

/** What is lost when Redis evicts the store's keys, for the eviction check's messages. */
const EVICTION_CONSEQUENCE =
  "a tag's key or the namespace's marker (the keys have no TTL): the tag, or the whole namespace, is " +
  "then refused until an operator restores it (ids stop rather than repeat)";

/** Counters of one store instance. */
export interface RedisStoreStats {
  /** Scripts sent to Redis. */
  roundTrips: number;
  /** Ranges returned. */
  rangesTaken: number;
  /** Calls refused by a script (a damaged or moved-back row, a fence, a lost key or marker). */
  refusals: number;
  /** Writes Redis made but fewer than waitReplicas replicas acknowledged in time (not answered). */
  notReplicated: number;
  /** Give-backs made, and refused (the max id or the version moved on). */
  givenBack: number;
  giveBacksRefused: number;
  /** The run id of the Redis process that answered the last range. */
  lastRunId: string | undefined;
}

/** The namespace's marker as {@link RedisSegmentStore.inspect} reads it. */
export interface RedisNamespaceState {
  /** False when there is no marker (never created, or lost): every call is refused. */
  exists: boolean;
  /** The Redis process the marker names (the one that last served the namespace). */
  runId: string | undefined;
  /** Replicas every write waits for, as recorded at creation. */
  waitReplicas: number | undefined;
  createdAt: number | undefined;
  /**
   * Redis TIME (ms) of the marker's last write: a takeover is accepted as a promotion only by a
   * process that started at or before it (undefined: edited by hand, fenced on any takeover).
   */
  writtenAt: number | undefined;
  /** Set while the namespace is fenced (every call refused): why and since when (ms). */
  fence: { reason: string; at: number | undefined } | undefined;
  /** The last fence lifted, and when (ms), with the raiseBy given. */
  lastLifted: { reason: string; at: number | undefined; raiseBy: string } | undefined;
  /** The last failover accepted without a fence (waitReplicas), and when (ms). */
  lastAccepted: { reason: string; at: number | undefined } | undefined;
  /** Tags the marker records, live and deleted. */
  tags: number;
  deletedTags: number;
}

/** What {@link RedisSegmentStore.liftFence} did. */
export interface LiftOutcome {
  /** False when the namespace was not fenced (nothing changed). */
  lifted: boolean;
  /** Why it was fenced ("restarted", "promoted"). */
  reason?: string;
  /** Tags whose max id was raised. */
  tagsRaised?: number;
}

/**
 * A {@link SegmentStore} on Redis (one server, one managed by Sentinel, or Redis Cluster): a hash
 * per tag (`<keyPrefix>{<namespace>}:tag:<tag>`) whose `max_id` moves by HINCRBY inside a Lua
 * script, and one marker per namespace that notices a Redis restarted, failed over or emptied and
 * fences the namespace rather than hand out ranges twice. See the README's failure table for what
 * is and is not guaranteed.
 */
export class RedisSegmentStore implements SegmentStore {
  readonly kind = "redis";
  readonly namespace: string;
  readonly keyPrefix: string;
  readonly keys: StoreKeys;
  private readonly o: ResolvedStoreOptions;
  private readonly link: RedisLink;
  private readonly floors = new RangeFloors();
  /** Per tag, the version the range ending at its floor left: a give-back must find it. */
  private readonly versions = new Map<string, string>();
  private readonly warned = new Set<RedisStoreWarning["type"]>();
  private starting: Promise<void> | undefined;
  private closed = false;
  private readonly counters: RedisStoreStats = {
    roundTrips: 0,
    rangesTaken: 0,
    refusals: 0,
    notReplicated: 0,
    givenBack: 0,
    giveBacksRefused: 0,
    lastRunId: undefined,
  };

  constructor(options: RedisSegmentStoreOptions) {
    this.o = resolveStoreOptions(options);
    this.namespace = this.o.namespace;
    this.keyPrefix = this.o.keyPrefix;
    this.keys = storeKeys(this.namespace, this.keyPrefix);
    // A command is never sent twice by a client made here: sent again after a reconnect, a write
    // could run after other changes (the give-back also checks a version for clients passed in).
    const owned = options.url !== undefined;
    this.link = new RedisLink({
      component: COMPONENT,
      url: options.url,
      client: options.client,
      redisOptions: owned
        ? { autoResendUnfulfilledCommands: false, ...options.redisOptions }
        : options.redisOptions,
      clusterOptions: options.clusterOptions,
      timeoutMs: this.o.commandTimeoutMs,
    });
    if (this.o.waitReplicas > 0 && this.link.topology === "cluster") {
      throw configError(
        COMPONENT,
        "waitReplicas",
        this.o.waitReplicas,
        "0 with Redis Cluster (WAIT is offered for one Redis, also one managed by Sentinel)",
      );
    }
  }

  /** Where Redis is, without any password. */
  get redis(): string {
    return this.link.description;
  }

  /**
   * Connects and checks Redis's eviction policy (INVALID_CONFIG for one that may evict the keys,
   * unless evictionCheck is "warn"). Run by the first call anyway. Idempotent.
   */
  start(): Promise<void> {
    if (this.closed) return Promise.reject(closedError("the Redis segment store"));
    this.starting ??= this.checkEviction().catch((error: unknown) => {
      this.starting = undefined;
      throw error;
    });
    return this.starting;
  }

  /**
   * Creates the namespace's marker when it is missing; answers false when it exists. Run it once
   * for a new namespace (the server and generators never do): without a marker every call is
   * refused, because a marker that is gone means Redis may have lost every tag's max id. After a
   * loss, run it only once the tags are restored above every id handed out. Tag keys found in the
   * namespace (SCAN) are recorded in the new marker with their max ids.
   */
  async createNamespace(): Promise<boolean> {
    // Read first: an existing marker is not written, so there is nothing for replicas to confirm.
    const state = await this.inspect();
    let recorded = state.exists ? String(state.waitReplicas ?? "") : undefined;
    if (recorded === undefined) {
      // Tag keys left from before (only the marker was lost) are recorded by the script: while the
      // marker is missing no tag key can be made, so none appears between the scan and the script.
      const found = await this.scanTagNames("creating the namespace");
      const reply = await this.call(
        CREATE_NAMESPACE_SCRIPT,
        [],
        [this.keys.tagPrefix, ...found],
        "creating the namespace",
        true,
      );
      const [outcome, raced] = asStrings(reply);
      if (outcome === "created") return true;
      recorded = raced;
    }
    if (recorded !== String(this.o.waitReplicas)) {
      throw refusalError(
        { kind: "SETTINGS", fields: { wait_replicas: recorded ?? "" } },
        this.refusalContext(),
      );
    }
    return false;
  }

  /**
   * Lifts the fence set after a restart or failover that may have lost writes: every tag's max id
   * (every tag key of the namespace, recorded in the marker or not, and every deleted tag's
   * recorded one) is first raised by `raiseBy`, then ranges are served
   * again. Call it only once every tag's max id plus `raiseBy` is above every id handed out (from
   * the ranges' users' own records, or a generous `raiseBy`). Answers `lifted: false` when the
   * namespace is not fenced (nothing changed).
   */
  async liftFence(options: { raiseBy: bigint }): Promise<LiftOutcome> {
    const raiseBy = options?.raiseBy;
    if (typeof raiseBy !== "bigint" || raiseBy < 0n || raiseBy > MAX_ID) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.INVALID_ARGUMENT,
        message: `liftFence: raiseBy is ${String(raiseBy)}, expected a bigint from 0 to 2^63 - 1 (ids by which every max id is raised first)`,
        details: { key: "raiseBy" },
      });
    }
    // Every tag key of the namespace is raised, also one the marker does not record (its copy
    // deleted by hand): no tag key is made while fenced.
    const found = await this.scanTagNames("lifting the fence");
    const reply = await this.call(
      LIFT_FENCE_SCRIPT,
      [],
      [raiseBy.toString(), (MAX_ID - raiseBy).toString(), this.keys.tagPrefix, ...found],
      "lifting the fence",
      true,
    );
    const [outcome, reason, raised] = asStrings(reply);
    if (outcome !== "lifted") return { lifted: false };
    return { lifted: true, reason: reason ?? "", tagsRaised: Number(raised) };
  }

  /** The namespace's marker (its own fields, and how many tags it records). Never refused. */
  async inspect(): Promise<RedisNamespaceState> {
    const fields = asStrings(await this.call(INSPECT_SCRIPT, [], [], "reading the marker", false));
    const m = new Map<string, string>();
    for (let i = 0; i + 1 < fields.length; i += 2) m.set(fields[i]!, fields[i + 1]!);
    const num = (key: string) => (m.has(key) ? Number(m.get(key)) : undefined);
    return {
      exists: m.has("run_id"),
      runId: m.get("run_id"),
      waitReplicas: num("wait_replicas"),
      createdAt: num("created_at_ms"),
      writtenAt: num("written_ms"),
      fence: m.has("fence_reason")
        ? { reason: m.get("fence_reason")!, at: num("fenced_at_ms") }
        : undefined,
      lastLifted: m.has("last_fence_reason")
        ? {
            reason: m.get("last_fence_reason")!,
            at: num("lifted_at_ms"),
            raiseBy: m.get("lifted_raise_by") ?? "0",
          }
        : undefined,
      lastAccepted: m.has("accepted_reason")
        ? { reason: m.get("accepted_reason")!, at: num("accepted_at_ms") }
        : undefined,
      tags: num("tags") ?? 0,
      deletedTags: num("deleted_tags") ?? 0,
    };
  }

  async listTags(): Promise<string[]> {
    return (await this.describeTags()).map((record) => record.tag);
  }

  async describeTags(): Promise<TagRecord[]> {
    const reply = await this.call(
      DESCRIBE_SCRIPT,
      [],
      [this.keys.tagPrefix],
      "describing tags",
      false,
    );
    if (!Array.isArray(reply)) throw this.unexpected(reply, "describing tags");
    return reply.map((row: unknown) => {
      const [tag, max, step, description, updated] = Array.isArray(row) ? row : [];
      return this.record(String(tag), [max, step, description, updated]);
    });
  }

  /**
   * Takes the next range (see {@link SegmentStore.takeRange}): one script checks the namespace's
   * marker, the row (step, max id, the marker's high-water max id, this instance's floor) and moves
   * the max id by HINCRBY, which refuses to pass 2^63 - 1. A range whose answer is lost is a gap:
   * the call may be made again (it takes another range).
   */
  async takeRange(tag: string, step?: number, given?: bigint): Promise<SegmentRange> {
    checkTag(tag);
    if (step !== undefined) checkStep(step);
    const { floor, mark } = floorOf(this.floors, tag, given);
    const reply = await this.call(
      TAKE_SCRIPT,
      [this.keys.tag(tag)],
      [tag, step === undefined ? "" : String(step), floor.toString()],
      `taking a range of tag ${JSON.stringify(tag)}`,
      true,
      { floor, floorSource: this.floors.source(tag), mark },
    );
    const [newMax, storedStep, version, runId] = asStrings(reply);
    const tableStep = Number(storedStep);
    const used = step ?? tableStep;
    if (
      newMax === undefined ||
      !/^\d{1,19}$/.test(newMax) ||
      !Number.isSafeInteger(tableStep) ||
      version === undefined ||
      runId === undefined
    ) {
      throw this.unexpected(reply, `taking a range of tag ${JSON.stringify(tag)}`);
    }
    const end = BigInt(newMax);
    const start = end - BigInt(used);
    if (end > this.floors.get(tag)) this.versions.set(tag, version);
    this.floors.raise(tag, end, runId, start);
    this.counters.rangesTaken++;
    this.counters.lastRunId = runId;
    return { tag, start, end, step: used, tableStep };
  }

  /**
   * Gives back `[from, end)` (see {@link SegmentStore.giveBack}): a probe reads the tag's max id
   * and version (a plain HMGET: no write when the give-back can no longer apply, and a connection
   * that answers before the write goes out), then the compare-and-set is sent once, never again:
   * the max id becomes `from` only while it is `end` and the version is the one this instance's
   * last range left, so a copy run late finds the version moved on.
   */
  async giveBack(tag: string, from: bigint, end: bigint): Promise<boolean> {
    if (this.floors.checkGiveBack(tag, from, end) === "moved-on") {
      this.counters.giveBacksRefused++;
      return false;
    }
    const version = this.versions.get(tag) ?? "";
    const what = `giving back ids [${from}, ${end}) of tag ${JSON.stringify(tag)}`;
    const probe = await this.readTag(tag, what);
    if (probe[0] !== end.toString() || probe[1] !== version) {
      this.counters.giveBacksRefused++;
      return false;
    }
    const reply = asStrings(
      await this.call(
        GIVE_BACK_SCRIPT,
        [this.keys.tag(tag)],
        [tag, from.toString(), end.toString(), version],
        what,
        true,
      ),
    );
    if (reply[0] !== "given") {
      this.counters.giveBacksRefused++;
      return false;
    }
    this.floors.lower(tag, from);
    this.versions.set(tag, reply[1] ?? "");
    this.counters.givenBack++;
    return true;
  }

  async createTag(input: NewTag): Promise<TagRecord> {
    const tag = normalizeNewTag(input);
    const reply = await this.call(
      CREATE_TAG_SCRIPT,
      [this.keys.tag(tag.tag)],
      [
        tag.tag,
        tag.startId.toString(),
        String(tag.step),
        tag.description ?? "",
        tag.description === null ? "0" : "1",
      ],
      `creating tag ${JSON.stringify(tag.tag)}`,
      true,
    );
    return this.record(tag.tag, Array.isArray(reply) ? reply : []);
  }

  async updateStep(tag: string, step: number): Promise<TagRecord> {
    checkTag(tag);
    checkStep(step);
    const reply = await this.call(
      UPDATE_STEP_SCRIPT,
      [this.keys.tag(tag)],
      [tag, String(step)],
      `changing the step of tag ${JSON.stringify(tag)}`,
      true,
    );
    return this.record(tag, Array.isArray(reply) ? reply : []);
  }

  /**
   * Deletes `tag` (see {@link SegmentStore.deleteTag}): its key goes and the marker keeps the
   * highest max id it ever had, below which createTag refuses it.
   */
  async deleteTag(tag: string): Promise<TagRecord | undefined> {
    checkTag(tag);
    const reply = await this.call(
      DELETE_TAG_SCRIPT,
      [this.keys.tag(tag)],
      [tag],
      `deleting tag ${JSON.stringify(tag)}`,
      true,
    );
    if (!Array.isArray(reply) || reply.length === 0) return undefined;
    const record = this.record(tag, reply.slice(0, 4));
    return { ...record, maxId: BigInt(String(reply[4])) };
  }

  /** Counters of this instance. */
  stats(): RedisStoreStats {
    return { ...this.counters };
  }

  /** Closes a client made from `url` (a client passed in stays open). Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.link.close();
  }

  /**
   * The names of the namespace's tag keys, by SCAN (on every master of a Cluster: the keys share
   * the namespace's hash tag, so one master has them all). Used where no tag key can be made
   * meanwhile (no marker, or a fenced one).
   */
  private async scanTagNames(what: string): Promise<string[]> {
    if (this.closed) throw closedError("the Redis segment store");
    await this.start();
    const prefix = this.keys.tagPrefix;
    const pattern = `${prefix.replace(/[*?[\]\\]/g, "\\$&")}*`;
    const names = new Set<string>();
    try {
      const servers: Redis[] =
        this.link.topology === "cluster"
          ? (this.link.client as Cluster).nodes("master")
          : [this.link.client as Redis];
      for (const server of servers) {
        let cursor = "0";
        do {
          this.counters.roundTrips++;
          const [next, keys] = await withTimeLimit(
            server.scan(cursor, "MATCH", pattern, "COUNT", 1000),
            this.o.commandTimeoutMs,
            "waiting for Redis to answer",
          );
          for (const key of keys) {
            if (key.startsWith(prefix) && key.length > prefix.length) {
              names.add(key.slice(prefix.length));
            }
          }
          cursor = next;
        } while (cursor !== "0");
      }
    } catch (error) {
      if (this.closed) throw closedError("the Redis segment store");
      throw this.failure(error, `${what} (listing the namespace's tag keys)`);
    }
    return [...names].sort();
  }

  /** The tag's max id and version by HMGET (the give-back's probe): ["", ""] when there is none. */
  private async readTag(tag: string, what: string): Promise<string[]> {
    if (this.closed) throw closedError("the Redis segment store");
    this.counters.roundTrips++;
    try {
      await this.link.connect();
      const reply = await withTimeLimit(
        this.link.client.hmget(this.keys.tag(tag), "max_id", "version"),
        this.o.commandTimeoutMs,
        "waiting for Redis to answer",
      );
      return [reply[0] ?? "", reply[1] ?? "0"];
    } catch (error) {
      if (this.closed) throw closedError("the Redis segment store");
      throw this.failure(error, what);
    }
  }

  private async checkEviction(): Promise<void> {
    const warning = await enforceRedisEviction(this.link, {
      component: COMPONENT,
      keysExpire: false,
      consequence: EVICTION_CONSEQUENCE,
      mode: this.o.evictionCheck,
      failure: (error) => this.failure(error, "reading maxmemory-policy"),
    });
    if (warning) this.warnOnce(warning);
  }

  private warnOnce(warning: RedisEvictionWarning): void {
    if (this.warned.has(warning.type)) return;
    this.warned.add(warning.type);
    this.o.onWarning(warning);
  }

  /**
   * Runs `script` with the marker as KEYS[1] and waitReplicas as ARGV[1]; a `write` waits for the
   * replicas when the namespace does (fewer in time: UNAVAILABLE, `details.reason`
   * "not-replicated"; the write was made on the master and is not answered). Refusals become the
   * Leaf errors of refusals.ts, anything else UNAVAILABLE (or CORRUPT_DATA for a key of another
   * kind).
   */
  private async call(
    script: LuaScript,
    keys: string[],
    args: string[],
    what: string,
    write: boolean,
    floor?: { floor: bigint; floorSource: string | undefined; mark: boolean },
  ): Promise<unknown> {
    if (this.closed) throw closedError("the Redis segment store");
    await this.start();
    const allKeys = [this.keys.marker, ...keys];
    const allArgs = [String(this.o.waitReplicas), ...args];
    this.counters.roundTrips++;
    try {
      if (!write || this.o.waitReplicas === 0) return await this.link.run(script, allKeys, allArgs);
      const { reply, acknowledged } = await this.link.runThenWait(script, allKeys, allArgs, {
        replicas: this.o.waitReplicas,
        waitMs: this.o.waitTimeoutMs,
      });
      if (acknowledged < this.o.waitReplicas) {
        this.counters.notReplicated++;
        throw new LeafError({
          component: COMPONENT,
          code: ErrorCodes.UNAVAILABLE,
          message:
            `${what}: ${acknowledged} of the ${this.o.waitReplicas} replicas acknowledged the write within ` +
            `${this.o.waitTimeoutMs} ms, so it is not answered (a range taken is a gap, never handed out; ` +
            "a give-back leaves its ids a gap). Check the replicas of Redis at " +
            `${this.link.description}, or lower waitReplicas in every store of the namespace`,
          details: {
            reason: "not-replicated",
            acknowledged,
            waitReplicas: this.o.waitReplicas,
            namespace: this.namespace,
          },
        });
      }
      return reply;
    } catch (error) {
      if (error instanceof LeafError) throw error;
      if (this.closed) throw closedError("the Redis segment store");
      const refusal =
        error instanceof Error && !(error instanceof TimeLimitError)
          ? parseRefusal(error.message)
          : undefined;
      if (refusal) {
        this.counters.refusals++;
        throw refusalError(refusal, { ...this.refusalContext(), ...floor });
      }
      throw this.failure(error, what);
    }
  }

  private refusalContext(): RefusalContext {
    return {
      where: `namespace ${JSON.stringify(this.namespace)} in Redis at ${this.link.description}`,
      namespace: this.namespace,
      markerKey: this.keys.marker,
      waitReplicas: this.o.waitReplicas,
    };
  }

  private failure(cause: unknown, what: string): LeafError {
    return redisCallError(cause, {
      component: COMPONENT,
      where: this.link.description,
      what,
      corrupt: /WRONGTYPE|not an integer|Expected value|attempt to/,
      keysOf: `namespace ${JSON.stringify(this.namespace)}`,
      ownKeys: "give the store its own namespace or keyPrefix",
      lastClientError: this.link.lastClientError,
      meanwhile: "Generators serve the ranges they hold meanwhile",
      details: { namespace: this.namespace },
    });
  }

  private unexpected(reply: unknown, what: string): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message: `${what}: Redis at ${this.link.description} answered ${JSON.stringify(reply)}, not what the store's script answers; another program may run scripts on these keys`,
      details: { namespace: this.namespace },
    });
  }

  /** A TagRecord from a script's {max id, step, description, updated ms}, checked. */
  private record(tag: string, fields: unknown[]): TagRecord {
    const [max, step, description, updated] = fields;
    const maxText = typeof max === "string" ? max : String(max);
    if (!/^-?\d{1,19}$/.test(maxText)) {
      throw refusalError({ kind: "BAD_MAX", fields: { tag, max: maxText } }, this.refusalContext());
    }
    const updatedAt = updated === null || updated === undefined ? null : Number(updated);
    return {
      tag,
      maxId: BigInt(maxText),
      step: Number(step),
      description: typeof description === "string" ? description : null,
      updatedAt: updatedAt !== null && Number.isFinite(updatedAt) ? updatedAt : null,
    };
  }
}

function asStrings(reply: unknown): string[] {
  return Array.isArray(reply) ? reply.map((v) => (v === null ? "" : String(v))) : [];
}
