// A segment store over a residue set: several independent databases (any stores that keep a
// residue record: memory, MySQL, ...), each handing out only the ids of its own residue class, as
// Didi tinyid's delta and remainder. A tag's ranges come from the database that served it last,
// and from the next one that answers when that one fails, so ids keep coming while any one lives,
// with no failover between them. Forming the set (and adding a database) is residue-set.ts.
import { performance } from "node:perf_hooks";
import {
  argumentError,
  type BackoffOptions,
  backoffDelay,
  configError,
  ErrorCodes,
  isLeafError,
  LeafError,
} from "@leaf/core";
import { bareMessage } from "@leaf/core/adapter";
import {
  badStoredResidue,
  describeRecord,
  residueProblem,
  sameMembers,
  sameRecord,
} from "./residue-record";
import type {
  NewTag,
  RangeResidue,
  ResidueRecord,
  SegmentRange,
  SegmentStore,
  TagRecord,
} from "./segment-store";
import { message, reasonOf } from "./tag-loader";
import {
  belowDeletedTag,
  COMPONENT,
  checkStep,
  checkTag,
  closedError,
  normalizeNewTag,
  RangeFloors,
  tagExists,
  unknownTag,
} from "./validation";

/** Options of {@link ResidueSegmentStore}. */
export interface ResidueSegmentStoreOptions {
  /**
   * The databases of the set, each a store that keeps a residue record (`readResidue` and
   * `writeResidue`): `MysqlSegmentStore`, `PostgresSegmentStore`, `MemorySegmentStore`, mixed as
   * you like. Formed into a set once with `formResidueSet` (which writes each one's residue).
   * Their order is the order a tag's first range is asked in.
   */
  members: readonly SegmentStore[];
  /** Names in messages, metrics and `status()` (default `${kind}#${index}`), one per member. */
  names?: readonly string[];
  /**
   * The set id every member must hold (`formResidueSet`'s report says it). Default: the set id of
   * the first member that answers; every other must hold the same.
   */
  setId?: string;
  /**
   * How long a range request waits for one member before asking the next one too, in ms (default
   * 1,000). A member with a call unanswered for longer is skipped until it answers (a hung or
   * paused server, a network cut). A range the slow member answers after all is not used (a gap).
   */
  hedgeMs?: number;
  /**
   * After the first member is verified, how long `start()` waits for the others, in ms (default
   * 3,000); the rest are verified when they answer.
   */
  startWaitMs?: number;
  /** Delays before a member that failed is asked again (default 100 ms doubling to 5,000 ms). */
  retry?: BackoffOptions;
  /** Close the member stores on `close()` (default true). */
  closeMembers?: boolean;
  /**
   * Told of every member failure (for logs): the store retries on its own. `level: "error"` marks a
   * misconfiguration (a member of another set, listed twice, a remainder taken, a damaged record),
   * which needs an operator.
   */
  onMemberError?: (error: unknown, context: MemberErrorContext) => void;
}

/** What {@link ResidueSegmentStoreOptions.onMemberError} is told besides the error. */
export interface MemberErrorContext {
  member: string;
  index: number;
  operation: "verify" | "take" | "read" | "give-back";
  tag?: string;
  level?: "error";
}

/** One member as {@link ResidueSegmentStore.status} shows it. */
export interface ResidueMemberStatus {
  name: string;
  kind: string;
  index: number;
  /**
   * `serving`: verified, ranges are taken from it. `unverified`: its residue was not read yet (or
   * changed, and is read again before its next range). `refused`: its residue is wrong for the set
   * (see `lastError`). `backoff`: it failed and is asked again in `retryInMs`. `stalled`: a call is
   * unanswered for longer than `hedgeMs`.
   */
  state: "serving" | "unverified" | "refused" | "backoff" | "stalled";
  delta: number | null;
  remainder: number | null;
  epoch: number | null;
  /** Ranges taken from it by this store. */
  rangesTaken: number;
  /** Failed calls in a row (0 after a success). */
  failures: number;
  lastError: string | null;
  retryInMs: number | null;
}

/** The class of a member's last range of a tag, for give-backs. */
interface RangeClass {
  stride: number;
  remainder: number;
  record: ResidueRecord;
}

class Member {
  /** The residue verified for it, or undefined until (again) read and checked. */
  record: ResidueRecord | undefined = undefined;
  verifying: Promise<ResidueRecord> | undefined = undefined;
  /** The record read last, verified or not: a database listed twice is told by its member id. */
  lastRead: ResidueRecord | undefined = undefined;
  /** The misconfiguration that refused it at its last verification. */
  refusal: LeafError | undefined = undefined;
  failures = 0;
  retryAt = 0;
  lastError: unknown = undefined;
  /** Start times (performance.now) of the calls in flight. */
  readonly pending = new Set<{ at: number }>();
  /** Per tag, when a tag the member refused (CORRUPT_DATA) is asked again. */
  readonly tagRetryAt = new Map<string, { at: number; failures: number }>();
  /** Ends of the ranges taken from it, per tag: which member a give-back belongs to. */
  readonly floors = new RangeFloors();
  readonly classes = new Map<string, RangeClass>();
  rangesTaken = 0;

  constructor(
    readonly index: number,
    readonly name: string,
    readonly store: SegmentStore,
  ) {}
}

/** Failures already counted (a verification's reaches the range request that waited for it). */
const counted = new WeakSet<object>();

/** Errors that are the member's answer about the tag, given alike by every member: not retried. */
const FINAL: ReadonlySet<string> = new Set([ErrorCodes.TAG_EXHAUSTED, ErrorCodes.INVALID_ARGUMENT]);

/**
 * A {@link SegmentStore} over N independent databases of a residue set: database `i` of `N` hands
 * out only ids `id % N === i` (its ranges carry `stride` N and `remainder` i), so two databases
 * never hand out the same id, and no database needs the others to be up.
 *
 * ```ts
 * const members = [new MysqlSegmentStore({ url: a }), new MysqlSegmentStore({ url: b })];
 * await formResidueSet(members); // once: writes remainder 0 of 2 in a, 1 of 2 in b
 * const store = new ResidueSegmentStore({ members });
 * const generator = new SegmentIdGenerator({ store });
 * ```
 *
 * - **Residue checked in every database.** At `start()` each member's record is read and checked
 *   against the others (one set id, one delta per epoch, no remainder twice, no database twice);
 *   a misconfiguration fails `start()` with INVALID_CONFIG naming the members, and a member found
 *   wrong later is refused (the others keep serving). After every range the member's record is
 *   read again: a range is used only when it is the very record verified before (same version),
 *   so a set re-formed meanwhile (`formResidueSet`) never gets a range of the old layout.
 * - **Keeps serving while one member lives.** A tag stays on the member that served it last; when
 *   that one fails (refused, unreachable, slower than `hedgeMs`) the next one is asked, and a
 *   failed member is asked again after a backoff.
 * - **Ids increase per database, not across databases.** Each member's ranges start at its own
 *   max id; after a switch to another member a tag's ids may be lower than before.
 * - **Admin calls go to every member**: `createTag` creates the tag where it is missing (a partial
 *   success rejects with UNAVAILABLE naming the members left, and a second call completes it),
 *   `updateStep` and `deleteTag` likewise; a tag deleted keeps its max id in each member.
 */
export class ResidueSegmentStore implements SegmentStore {
  readonly kind = "residue";
  readonly stridedRanges = true;
  /** Gives back ids of the member that handed them out (only when every member can). */
  readonly giveBack?: (
    tag: string,
    from: bigint,
    end: bigint,
    residue?: RangeResidue,
  ) => Promise<boolean>;
  private readonly members: Member[];
  private readonly hedgeMs: number;
  private readonly startWaitMs: number;
  private readonly retry: BackoffOptions;
  private readonly closeMembers: boolean;
  private readonly onMemberError: ResidueSegmentStoreOptions["onMemberError"];
  private setId: string | undefined;
  /** The highest epoch of any member verified: a member active at a lower one is refused. */
  private epoch = -1;
  /** Per tag, the member that served it last. */
  private readonly preferred = new Map<string, number>();
  private starting: Promise<void> | undefined;
  private started = false;
  private closed = false;

  constructor(options: ResidueSegmentStoreOptions) {
    if (!options || typeof options !== "object") {
      throw configError(COMPONENT, "options", options, "{ members: [store, ...] }");
    }
    const { members } = options;
    if (!Array.isArray(members) || members.length === 0) {
      throw configError(COMPONENT, "members", members, "a non-empty array of segment stores");
    }
    members.forEach((store, i) => {
      if (
        !store ||
        typeof store.takeRange !== "function" ||
        typeof store.readResidue !== "function" ||
        typeof store.writeResidue !== "function"
      ) {
        throw configError(
          COMPONENT,
          `members[${i}]`,
          store?.kind ?? store,
          "a segment store that keeps a residue record (readResidue, writeResidue): MysqlSegmentStore, PostgresSegmentStore, MemorySegmentStore",
        );
      }
    });
    const names = options.names ?? members.map((s, i) => `${s.kind}#${i}`);
    if (
      !Array.isArray(names) ||
      names.length !== members.length ||
      names.some((n) => typeof n !== "string" || n.length === 0) ||
      new Set(names).size !== names.length
    ) {
      throw configError(
        COMPONENT,
        "names",
        names,
        `${members.length} distinct non-empty strings, one per member`,
      );
    }
    this.members = members.map((store, i) => new Member(i, names[i]!, store));
    this.hedgeMs = positive("hedgeMs", options.hedgeMs ?? 1_000);
    this.startWaitMs = positive("startWaitMs", options.startWaitMs ?? 3_000);
    this.retry = options.retry ?? { initialMs: 100, maxMs: 5_000 };
    this.closeMembers = options.closeMembers ?? true;
    this.onMemberError = options.onMemberError;
    if (options.setId !== undefined) {
      if (typeof options.setId !== "string" || options.setId.length === 0) {
        throw configError(COMPONENT, "setId", options.setId, "the set id formResidueSet reported");
      }
      this.setId = options.setId;
    }
    if (members.every((s) => typeof s.giveBack === "function")) {
      this.giveBack = (tag, from, end, residue) => this.giveBackToMember(tag, from, end, residue);
    }
  }

  /**
   * Reads and checks every member's residue. Resolves once every member answered, or
   * `startWaitMs` after the first was verified (the rest are verified when they answer). Rejects
   * with INVALID_CONFIG (or CORRUPT_DATA) when a member that answered is misconfigured, and with
   * UNAVAILABLE when none could be verified.
   */
  start(): Promise<void> {
    if (this.closed) return Promise.reject(closedError("the residue segment store"));
    if (this.started) return Promise.resolve();
    this.starting ??= this.doStart().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private async doStart(): Promise<void> {
    await new Promise<void>((resolve) => {
      let left = this.members.length;
      let timer: ReturnType<typeof setTimeout> | undefined;
      for (const m of this.members) {
        this.verify(m)
          .then(
            () => {
              if (timer === undefined) {
                timer = setTimeout(resolve, this.startWaitMs);
                timer.unref?.();
              }
            },
            () => {},
          )
          .finally(() => {
            if (--left === 0) {
              clearTimeout(timer);
              resolve();
            }
          });
      }
    });
    // A database listed twice, or one of another set, also makes the list longer than the set
    // (refused as stale-epoch): told first.
    const refused = this.members.filter((m) => m.refusal !== undefined);
    const wrong =
      refused.find((m) => m.refusal!.details.reason === "listed-twice") ??
      refused.find((m) => m.refusal!.details.reason === "other-set") ??
      refused[0];
    if (wrong !== undefined) {
      throw new LeafError({
        component: COMPONENT,
        code: wrong.refusal!.code,
        message: `the residue set cannot start: ${bareMessage(wrong.refusal!)}`,
        details: { ...wrong.refusal!.details, member: wrong.name },
        cause: wrong.refusal,
      });
    }
    if (!this.members.some((m) => m.record !== undefined)) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.UNAVAILABLE,
        message: `no database of the residue set could be verified: ${this.members
          .map(
            (m) => `${m.name}: ${m.lastError === undefined ? "no answer" : message(m.lastError)}`,
          )
          .join("; ")}`,
        details: { members: this.members.map((m) => m.name) },
        cause: this.members.find((m) => m.lastError !== undefined)?.lastError,
      });
    }
    this.started = true;
  }

  /** Tags held by any member that answers (a member slower than `hedgeMs` is not waited for). */
  async listTags(): Promise<string[]> {
    const answers = await this.readAll((s) => s.listTags());
    const tags = new Set<string>();
    for (const [, list] of answers) for (const tag of list) tags.add(tag);
    return [...tags];
  }

  /**
   * Every tag held by any member that answers, ordered by tag: the highest max id of the members
   * (every id handed out is below it), the step and description of the first member holding it,
   * the latest update time.
   */
  async describeTags(): Promise<TagRecord[]> {
    const answers = await this.readAll((s) => s.describeTags());
    return merge(answers.map(([, records]) => records));
  }

  /**
   * A range of `tag` from the member that served it last, or the next one that answers: its ids are
   * the ones of `[start, end)` in the member's residue class (`stride`, `remainder`). Rejects with
   * UNKNOWN_TAG when no member holds the tag, TAG_EXHAUSTED when the member asked has no room left,
   * and otherwise, when no member gives a range, with the common error of every member's failure
   * (UNAVAILABLE when they differ), each member named with what it answered.
   */
  takeRange(tag: string, step?: number): Promise<SegmentRange> {
    if (this.closed) return Promise.reject(closedError("the residue segment store"));
    try {
      checkTag(tag);
      if (step !== undefined) checkStep(step);
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise((resolve, reject) => {
      const tried = new Set<Member>();
      const failures: [Member, unknown][] = [];
      let running = 0;
      let done = false;
      const launch = (): void => {
        if (done) return;
        if (this.closed) {
          done = true;
          reject(closedError("the residue segment store"));
          return;
        }
        const m = this.pick(tag, tried);
        if (m === undefined) {
          if (running === 0) {
            done = true;
            reject(this.noRange(tag, failures, tried));
          }
          return;
        }
        tried.add(m);
        running++;
        const hedge = setTimeout(launch, this.hedgeMs);
        hedge.unref?.();
        this.attempt(m, tag, step).then(
          (range) => {
            clearTimeout(hedge);
            running--;
            if (done) return; // a slower member answered after all: its range is a gap
            done = true;
            this.preferred.set(tag, m.index);
            resolve(range);
          },
          (error: unknown) => {
            clearTimeout(hedge);
            running--;
            this.failed(m, error, "take", tag);
            if (done) return;
            failures.push([m, error]);
            if (isLeafError(error) && FINAL.has(error.code)) {
              done = true;
              reject(error);
              return;
            }
            launch();
          },
        );
      };
      launch();
    });
  }

  /**
   * Creates `tag` in every member that lacks it. Rejects with ALREADY_EXISTS when every member
   * holds it, or when a member deleted it with a higher max id (`details.minStartId`: the highest
   * of them; the members that created it now delete it again, so no member is left holding it);
   * with UNAVAILABLE (`details.reason` "partial", `details.missing`) when a member could not be
   * reached: call again once it answers (the members holding the tag serve it meanwhile).
   */
  async createTag(input: NewTag): Promise<TagRecord> {
    this.checkOpen();
    const tag = normalizeNewTag(input);
    const results = await this.writeAll((s) => s.createTag(tag));
    const created = results.filter(isOk);
    const failed = results.filter(isFailed);
    const deleted = failed.filter((r) => reasonOf(r.error) === "deleted");
    if (deleted.length > 0) {
      await Promise.allSettled(created.map((r) => r.member.store.deleteTag(tag.tag)));
      let min = 0n;
      for (const r of deleted) {
        const value = BigInt(String((r.error as LeafError).details.minStartId ?? "0"));
        if (value > min) min = value;
      }
      throw belowDeletedTag(tag.tag, tag.startId, min, this.where());
    }
    const missing = failed.filter((r) => reasonOf(r.error) !== "exists");
    if (missing.length > 0)
      throw partial(`creating tag ${JSON.stringify(tag.tag)}`, created, missing);
    if (created.length === 0) throw tagExists(tag.tag, this.where());
    return merge(created.map((r) => [r.value as TagRecord]))[0]!;
  }

  /**
   * Changes the step of `tag` in every member holding it. UNKNOWN_TAG when none holds it;
   * UNAVAILABLE ("partial") when a member could not be reached: call again.
   */
  async updateStep(tag: string, step: number): Promise<TagRecord> {
    this.checkOpen();
    checkTag(tag);
    checkStep(step);
    const results = await this.writeAll((s) => s.updateStep(tag, step));
    const changed = results.filter(isOk);
    const missing = results
      .filter(isFailed)
      .filter((r) => !isLeafError(r.error, ErrorCodes.UNKNOWN_TAG));
    if (missing.length > 0)
      throw partial(`changing the step of tag ${JSON.stringify(tag)}`, changed, missing);
    if (changed.length === 0) throw unknownTag(tag, this.where());
    return merge(changed.map((r) => [r.value as TagRecord]))[0]!;
  }

  /**
   * Deletes `tag` from every member (each keeps the max id it had, so no member creates it again
   * below); answers the highest of their records, or undefined when none held it. UNAVAILABLE
   * ("partial") when a member could not be reached: call again once it answers (until then the
   * members still holding the tag serve it).
   */
  async deleteTag(tag: string): Promise<TagRecord | undefined> {
    this.checkOpen();
    checkTag(tag);
    const results = await this.writeAll((s) => s.deleteTag(tag));
    const done = results.filter(isOk);
    const missing = results.filter(isFailed);
    if (missing.length > 0) throw partial(`deleting tag ${JSON.stringify(tag)}`, done, missing);
    const records = done.map((r) => r.value).filter((v): v is TagRecord => v !== undefined);
    if (records.length === 0) return undefined;
    this.preferred.delete(tag);
    return merge(records.map((r) => [r]))[0];
  }

  /** Members: their residue, state and counters (for monitoring). */
  status(): ResidueMemberStatus[] {
    const now = performance.now();
    return this.members.map((m) => ({
      name: m.name,
      kind: m.store.kind,
      index: m.index,
      state:
        m.refusal !== undefined
          ? "refused"
          : this.stalled(m, now)
            ? "stalled"
            : m.retryAt > now
              ? "backoff"
              : m.record === undefined
                ? "unverified"
                : "serving",
      delta: m.record?.delta ?? null,
      remainder: m.record?.remainder ?? null,
      epoch: m.record?.epoch ?? null,
      rangesTaken: m.rangesTaken,
      failures: m.failures,
      lastError: m.lastError === undefined ? null : message(m.lastError),
      retryInMs: m.retryAt > now ? Math.round(m.retryAt - now) : null,
    }));
  }

  /** Closes the member stores (unless `closeMembers: false`). Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.closeMembers) await Promise.allSettled(this.members.map((m) => m.store.close()));
  }

  // ---- members
  // -----------------------------------------------------------------------------------

  /** Reads and checks the residue of `m` (one read at a time per member). */
  private verify(m: Member): Promise<ResidueRecord> {
    m.verifying ??= this.doVerify(m).finally(() => {
      m.verifying = undefined;
    });
    return m.verifying;
  }

  private async doVerify(m: Member): Promise<ResidueRecord> {
    try {
      await this.track(m, m.store.start?.() ?? Promise.resolve());
      const record = await this.track(m, m.store.readResidue!());
      this.accept(m, record);
      // It answers again: its backoff and last error are over (status() shows it serving).
      m.failures = 0;
      m.retryAt = 0;
      m.lastError = undefined;
      return record!;
    } catch (error) {
      m.record = undefined;
      if (isMisconfiguration(error)) m.refusal = error as LeafError;
      this.failed(m, error, "verify");
      throw error;
    }
  }

  /** Checks `record` of `m` against the set and the other members; makes it verified. */
  private accept(m: Member, record: ResidueRecord | undefined): asserts record is ResidueRecord {
    if (record === undefined) {
      throw this.misconfigured(
        m,
        "no-residue",
        "holds no residue record: form the set first with formResidueSet over every database of it, in order",
      );
    }
    const problem = residueProblem(record);
    if (problem !== undefined) throw badStoredResidue(record, problem, m.name);
    m.lastRead = record;
    const twin = this.members.find(
      (o) => o !== m && o.lastRead !== undefined && o.lastRead.memberId === record.memberId,
    );
    if (twin !== undefined) {
      throw this.misconfigured(
        m,
        "listed-twice",
        `is the same database as ${twin.name} (member id ${record.memberId}): list each database once`,
      );
    }
    if (record.state !== "active") {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.UNAVAILABLE,
        message: `${m.name} is ${record.state === "joining" ? "joining" : "fenced from"} the residue set (${describeRecord(record)}): the set is being formed or re-formed (formResidueSet running, or interrupted: run it again with the same members); no range is taken from it until it is active`,
        details: { reason: "residue-fenced", member: m.name, state: record.state },
      });
    }
    if (this.setId !== undefined && record.setId !== this.setId) {
      throw this.misconfigured(
        m,
        "other-set",
        `belongs to another residue set (set ${record.setId}, this one is ${this.setId}): list only databases of one set`,
      );
    }
    // Before any member is verified (the set id not known yet), any two records read tell.
    const stranger = this.members.find(
      (o) => o !== m && o.lastRead !== undefined && o.lastRead.setId !== record.setId,
    );
    if (this.setId === undefined && stranger !== undefined) {
      throw this.misconfigured(
        m,
        "other-set",
        `belongs to another residue set than ${stranger.name} (set ${record.setId}, ${stranger.name}: set ${stranger.lastRead!.setId}): list only databases of one set`,
      );
    }
    for (const o of this.members) {
      const other = o.record;
      if (o === m || other === undefined) continue;
      if (other.epoch !== record.epoch) continue;
      if (!sameMembers(other.members, record.members)) {
        throw this.misconfigured(
          m,
          "other-list",
          `names other members of epoch ${record.epoch} than ${o.name} does (${describeRecord(record)}; ${describeRecord(other)}): a record changed by hand, or two formResidueSet runs with different lists; form the set again with formResidueSet`,
        );
      }
      if (other.delta !== record.delta) {
        throw this.misconfigured(
          m,
          "delta-mismatch",
          `says the set has ${record.delta} databases, ${o.name} says ${other.delta} (epoch ${record.epoch}): a record changed by hand; form the set again with formResidueSet`,
        );
      }
      if (other.remainder === record.remainder) {
        throw this.misconfigured(
          m,
          "remainder-taken",
          `holds remainder ${record.remainder} of ${record.delta}, as ${o.name} does: two databases would hand out the same ids; form the set again with formResidueSet`,
        );
      }
    }
    if (record.delta < this.members.length) {
      // The store lists more databases than the record's epoch has: this database was left out of
      // a re-forming (or restored from a backup of an older epoch), or the set was not re-formed
      // with the new databases yet. Told by its own record, whichever other member answers.
      throw this.misconfigured(
        m,
        "stale-epoch",
        `says the set has ${record.delta} databases (${describeRecord(record)}) but ${this.members.length} are listed: it was left out when the set was re-formed, restored from a backup of an older epoch, or the set was not re-formed with the databases listed yet; run formResidueSet with every database of the set (and list each database once)`,
      );
    }
    if (record.epoch < this.epoch) {
      throw this.misconfigured(
        m,
        "stale-epoch",
        `is at epoch ${record.epoch} while the set is at epoch ${this.epoch}: it was left out when the set was re-formed (or restored from a backup); run formResidueSet with every database of the set`,
      );
    }
    if (record.epoch > this.epoch) {
      this.epoch = record.epoch;
      // Members verified at an older epoch are read again before their next range.
      for (const o of this.members)
        if (o.record !== undefined && o.record.epoch < record.epoch) o.record = undefined;
    }
    this.setId ??= record.setId;
    m.record = record;
    m.refusal = undefined;
  }

  private misconfigured(m: Member, reason: string, what: string): LeafError {
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.INVALID_CONFIG,
      message: `database ${m.name} of the residue set ${what}`,
      details: { reason, member: m.name },
    });
  }

  /**
   * One range from `m`: its residue verified (read when not yet), the range taken, the residue
   * read again. The range is used only when the record read after it is the one verified before
   * (same version): no write of the record, such as the fence of a re-forming, came in between.
   */
  private async attempt(m: Member, tag: string, step: number | undefined): Promise<SegmentRange> {
    const record = m.record ?? (await this.verify(m));
    const range = await this.track(m, m.store.takeRange(tag, step));
    const after = await this.track(m, m.store.readResidue!());
    if (!sameRecord(after, record)) {
      if (m.record === record) m.record = undefined;
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.UNAVAILABLE,
        message: `the residue record of ${m.name} changed while a range of tag ${JSON.stringify(tag)} was taken (${describeRecord(record)}, now ${describeRecord(after)}): the range [${range.start}, ${range.end}) is not used (a gap); the record is read again before the next range`,
        details: { reason: "residue-changed", member: m.name, tag },
      });
    }
    m.failures = 0;
    m.retryAt = 0;
    m.lastError = undefined;
    m.tagRetryAt.delete(tag);
    m.floors.raise(tag, range.end, m.name, range.start);
    m.classes.set(tag, { stride: record.delta, remainder: record.remainder, record });
    m.rangesTaken++;
    return record.delta === 1
      ? range
      : { ...range, stride: record.delta, remainder: record.remainder };
  }

  /**
   * The next member to ask for a range of `tag`, not yet `tried`: the one that served it last,
   * then the following ones in order, skipping members that wait out a backoff or have a call
   * unanswered for longer than `hedgeMs`. When every untried one waits out a backoff and none was
   * asked yet, the one whose retry comes first.
   */
  private pick(tag: string, tried: Set<Member>): Member | undefined {
    const now = performance.now();
    const n = this.members.length;
    const first = this.preferred.get(tag) ?? 0;
    let fallback: Member | undefined;
    let fallbackAt = Number.POSITIVE_INFINITY;
    for (let k = 0; k < n; k++) {
      const m = this.members[(first + k) % n]!;
      if (tried.has(m) || this.stalled(m, now)) continue;
      const at = Math.max(m.retryAt, m.tagRetryAt.get(tag)?.at ?? 0);
      if (at <= now) return m;
      if (at < fallbackAt) {
        fallback = m;
        fallbackAt = at;
      }
    }
    return tried.size === 0 ? fallback : undefined;
  }

  /** True when `m` has a call unanswered for longer than `hedgeMs`. */
  private stalled(m: Member, now: number): boolean {
    for (const call of m.pending) if (now - call.at > this.hedgeMs) return true;
    return false;
  }

  /** Counts `promise` as a call in flight on `m` until it settles. */
  private track<T>(m: Member, promise: Promise<T>): Promise<T> {
    const call = { at: performance.now() };
    m.pending.add(call);
    return promise.finally(() => m.pending.delete(call));
  }

  /**
   * A failure of `m`: a backoff of the member, or of the tag on it (a refused row), and a report.
   */
  private failed(
    m: Member,
    error: unknown,
    operation: MemberErrorContext["operation"],
    tag?: string,
  ): void {
    if (this.closed) return;
    // A verification's failure reaches the range request that waited for it too: counted once.
    if (typeof error === "object" && error !== null) {
      if (counted.has(error)) return;
      counted.add(error);
    }
    const now = performance.now();
    if (isLeafError(error) && FINAL.has(error.code)) return;
    if (isLeafError(error, ErrorCodes.UNKNOWN_TAG)) return;
    if (
      tag !== undefined &&
      isLeafError(error, ErrorCodes.CORRUPT_DATA) &&
      reasonOf(error) !== "bad-residue"
    ) {
      const prev = m.tagRetryAt.get(tag)?.failures ?? 0;
      m.tagRetryAt.set(tag, { at: now + backoffDelay(prev, this.retry), failures: prev + 1 });
    } else {
      m.failures++;
      m.retryAt = now + backoffDelay(m.failures - 1, this.retry);
    }
    m.lastError = error;
    const level =
      isMisconfiguration(error) || isLeafError(error, ErrorCodes.CORRUPT_DATA)
        ? { level: "error" as const }
        : {};
    try {
      this.onMemberError?.(error, {
        member: m.name,
        index: m.index,
        operation,
        ...(tag === undefined ? {} : { tag }),
        ...level,
      });
    } catch {
      // The handler's own failure is not the store's to handle.
    }
  }

  /** The error when no member gave a range of `tag`. */
  private noRange(tag: string, failures: [Member, unknown][], tried: Set<Member>): LeafError {
    const said = failures.map(([m, e]) => `${m.name}: ${message(e)}`);
    const now = performance.now();
    for (const m of this.members) {
      if (tried.has(m)) continue;
      const why = this.stalled(m, now)
        ? `a call unanswered for over ${this.hedgeMs} ms`
        : `waiting out a backoff${m.lastError === undefined ? "" : ` after: ${message(m.lastError)}`}`;
      said.push(`${m.name}: not asked (${why})`);
    }
    const details = {
      tag,
      members: this.members.map((m) => m.name),
      failures: said,
    };
    if (failures.length > 0 && failures.length === this.members.length) {
      const codes = new Set(failures.map(([, e]) => (isLeafError(e) ? e.code : "")));
      if (codes.size === 1 && codes.has(ErrorCodes.UNKNOWN_TAG))
        return unknownTag(tag, this.where());
      const [code] = codes;
      if (
        codes.size === 1 &&
        (code === ErrorCodes.CORRUPT_DATA || code === ErrorCodes.INVALID_CONFIG)
      ) {
        const first = failures[0]![1] as LeafError;
        return new LeafError({
          component: COMPONENT,
          code: first.code,
          message: `no database of the residue set gave a range of tag ${JSON.stringify(tag)}: ${said.join("; ")}`,
          details: { ...first.details, ...details },
          cause: first,
        });
      }
    }
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `no database of the residue set gave a range of tag ${JSON.stringify(tag)} (${said.join("; ")}); ids resume when one answers`,
      details,
      cause: failures.at(-1)?.[1],
    });
  }

  /**
   * `call` on every member not stalled; answers once all answered, or `hedgeMs` after the first
   * answer. Members not verified (or due to be asked again) get their residue read meanwhile, in
   * the background: the generator's refresh is the set's health check.
   */
  private readAll<T>(call: (store: SegmentStore) => Promise<T>): Promise<[Member, T][]> {
    this.checkOpen();
    const now = performance.now();
    for (const m of this.members) {
      if (this.stalled(m, now) || m.retryAt > now || m.verifying !== undefined) continue;
      void this.verify(m).catch(() => {});
    }
    const asked = this.members.filter((m) => !this.stalled(m, now));
    return new Promise((resolve, reject) => {
      const answers: [Member, T][] = [];
      const failures: [Member, unknown][] = [];
      let left = asked.length;
      let settled = false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const finish = () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (answers.length > 0) resolve(answers.sort(([a], [b]) => a.index - b.index));
        else reject(this.noAnswer(failures));
      };
      if (left === 0) finish();
      for (const m of asked) {
        this.track(m, call(m.store)).then(
          (value) => {
            answers.push([m, value]);
            if (--left === 0) finish();
            else if (timer === undefined) {
              timer = setTimeout(finish, this.hedgeMs);
              timer.unref?.();
            }
          },
          (error: unknown) => {
            failures.push([m, error]);
            this.failed(m, error, "read");
            if (--left === 0) finish();
          },
        );
      }
    });
  }

  private noAnswer(failures: [Member, unknown][]): LeafError {
    const first = failures[0]?.[1];
    const said = this.members.map((m) => {
      const f = failures.find(([x]) => x === m);
      return `${m.name}: ${f === undefined ? `a call unanswered for over ${this.hedgeMs} ms` : message(f[1])}`;
    });
    const code =
      failures.length === this.members.length &&
      isLeafError(first) &&
      failures.every(([, e]) => isLeafError(e, first.code))
        ? first.code
        : ErrorCodes.UNAVAILABLE;
    return new LeafError({
      component: COMPONENT,
      code,
      message: `no database of the residue set answered (${said.join("; ")})`,
      details: { members: this.members.map((m) => m.name), failures: said },
      cause: first,
    });
  }

  /** `call` on every member, each one's outcome. */
  private async writeAll<T>(
    call: (store: SegmentStore) => Promise<T>,
  ): Promise<
    ({ member: Member; ok: true; value: T } | { member: Member; ok: false; error: unknown })[]
  > {
    const settled = await Promise.allSettled(this.members.map((m) => this.track(m, call(m.store))));
    return settled.map((s, i) =>
      s.status === "fulfilled"
        ? { member: this.members[i]!, ok: true as const, value: s.value }
        : { member: this.members[i]!, ok: false as const, error: s.reason },
    );
  }

  /**
   * Gives `[from, end)` of `tag` back to the member whose last range of the tag ends at `end` (of
   * the class `residue` names), when its residue is still the one that range was taken under.
   */
  private async giveBackToMember(
    tag: string,
    from: bigint,
    end: bigint,
    residue?: RangeResidue,
  ): Promise<boolean> {
    this.checkOpen();
    checkTag(tag);
    const owners: Member[] = [];
    let movedOn = false;
    let refusal: unknown;
    for (const m of this.members) {
      const cls = m.classes.get(tag);
      if (cls === undefined) continue;
      if (
        residue !== undefined &&
        (cls.stride !== residue.stride || cls.remainder !== residue.remainder)
      )
        continue;
      try {
        if (m.floors.checkGiveBack(tag, from, end) === "mine") owners.push(m);
        else movedOn = true;
      } catch (error) {
        refusal ??= error;
      }
    }
    if (owners.length > 1) {
      throw argumentError(
        COMPONENT,
        "residue",
        residue,
        `the stride and remainder of the range: ${owners.map((m) => m.name).join(" and ")} each handed out a range of tag ${JSON.stringify(tag)} ending at ${end}`,
      );
    }
    const m = owners[0];
    if (m === undefined) {
      if (movedOn) return false;
      throw (
        refusal ??
        argumentError(
          COMPONENT,
          "end",
          end,
          `the end of a range this store handed out for tag ${JSON.stringify(tag)} (none)`,
        )
      );
    }
    const cls = m.classes.get(tag)!;
    const now = await this.track(m, m.store.readResidue!());
    if (!sameRecord(now, cls.record)) return false;
    const given = await this.track(m, m.store.giveBack!(tag, from, end));
    if (given) m.floors.lower(tag, from);
    return given;
  }

  private where(): string {
    return `the residue set (${this.members.map((m) => m.name).join(", ")})`;
  }

  private checkOpen(): void {
    if (this.closed) throw closedError("the residue segment store");
  }
}

type Outcome<T> = { member: Member; ok: true; value: T } | Failed;
type Failed = { member: Member; ok: false; error: unknown };

function isOk<T>(r: Outcome<T>): r is { member: Member; ok: true; value: T } {
  return r.ok;
}

function isFailed<T>(r: Outcome<T>): r is Failed {
  return !r.ok;
}

/** Every tag of `lists` (one list per member, in member order), merged: see describeTags. */
function merge(lists: readonly (readonly TagRecord[])[]): TagRecord[] {
  const byTag = new Map<string, TagRecord>();
  for (const list of lists) {
    for (const r of list) {
      const seen = byTag.get(r.tag);
      if (seen === undefined) {
        byTag.set(r.tag, { ...r });
        continue;
      }
      byTag.set(r.tag, {
        tag: r.tag,
        maxId: higher(r.maxId, seen.maxId),
        step: seen.step,
        description: seen.description ?? r.description,
        updatedAt:
          seen.updatedAt === null
            ? r.updatedAt
            : r.updatedAt === null
              ? seen.updatedAt
              : Math.max(seen.updatedAt, r.updatedAt),
      });
    }
  }
  return [...byTag.values()].sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
}

/** The higher of two ids (Math.max takes no bigint). */
function higher(a: bigint, b: bigint): bigint {
  if (a > b) return a;
  return b;
}

/** UNAVAILABLE for an admin change made in some members only. */
function partial(
  doing: string,
  done: readonly { member: Member }[],
  missing: readonly Failed[],
): LeafError {
  const names = (rs: readonly { member: Member }[]) => rs.map((r) => r.member.name);
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message:
      `${doing} in the residue set: done in ${names(done).join(", ") || "no member"}; not in ${missing.map((r) => `${r.member.name} (${message(r.error)})`).join(", ")}. ` +
      "Call it again once they answer: it completes the change where it is missing",
    details: { reason: "partial", done: names(done), missing: names(missing) },
    cause: missing[0]?.error,
  });
}

/** A member's answer that needs an operator: another set, listed twice, a damaged record. */
function isMisconfiguration(error: unknown): boolean {
  return (
    isLeafError(error, ErrorCodes.INVALID_CONFIG) ||
    (isLeafError(error, ErrorCodes.CORRUPT_DATA) && reasonOf(error) === "bad-residue")
  );
}

function positive(key: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
    throw configError(COMPONENT, key, value, "a positive integer of ms");
  }
  return value;
}
