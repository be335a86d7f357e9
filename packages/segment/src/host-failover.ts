// What the SQL segment stores (@leaf/segment-mysql, @leaf/segment-postgres) share beyond their SQL:
// one host at a time out of a failover list, read-only hosts skipped, writes that set a value sent
// at most once, ranges refused while another listed host is writable (a split brain), when the row
// is damaged or when its max id is behind this instance's ranges, and the counters of all that. A
// store brings its driver (connections, errors, the writability question) and its statements.
import { ErrorCodes, LeafError } from "@leaf/core";
import type { DatabaseErrorKind } from "@leaf/core/adapter";
import type { SegmentRange } from "./segment-store";
import {
  badStoredMaxId,
  badStoredStep,
  COMPONENT,
  checkStep,
  checkTag,
  closedError,
  floorOf,
  MAX_ID,
  MAX_STEP,
  maxIdMovedBack,
  RangeFloors,
  rangeOverflow,
} from "./validation";

/** A database error classified by the store's driver. */
export interface HostErrorInfo {
  kind: DatabaseErrorKind;
  /**
   * The server's own code for the error (a MySQL errno, a PostgreSQL SQLSTATE); undefined when the
   * server did not answer (a socket error, a client-side timeout).
   */
  serverCode: number | string | undefined;
  /** The server's (or the socket's) own text. */
  text: string;
  /**
   * For `statement`: true when the same statement may succeed on another try or another host
   * (deadlock, lock wait), false when the statement itself is refused.
   */
  transient: boolean;
}

/**
 * Thrown by a store inside a host attempt when the host answered that it takes no writes: the
 * attempt moves to the next host, and for a write sent once it means nothing was changed.
 */
export class ReadOnlyHost extends Error {}

/** How a store reaches its hosts and reads its database's errors. */
export interface HostDriver<Conn> {
  /** The database's name in messages: "MySQL", "PostgreSQL". */
  readonly product: string;
  /** "host:port" of each listed host, in failover order. */
  readonly hostNames: readonly string[];
  /** Where the operator lists the hosts, e.g. "the url (or hosts) option". */
  readonly serverOption: string;
  /** How to make a host read-only, for the split-brain message. */
  readonly makeReadOnly: string;
  /** A connection to host `index` (from its pool). */
  connect(index: number): Promise<Conn>;
  /** Returns a clean connection to its pool. */
  release(conn: Conn): void;
  /** Drops a connection (the server rolls back a transaction it left open). */
  destroy(conn: Conn): void;
  /** Runs a statement that answers no rows (DDL, `SELECT 1`). */
  execute(conn: Conn, sql: string): Promise<void>;
  /**
   * Resolves when the host of `conn` takes writes now (a primary, not read-only); rejects with a
   * {@link ReadOnlyHost} when it does not.
   */
  checkWritable(conn: Conn): Promise<void>;
  /** Classifies an error of a statement or a connection. */
  classify(error: unknown): HostErrorInfo;
  /** The LeafError an operator reads for `error` on `host` while `doing`. */
  toError(error: unknown, doing: string, host: string): LeafError;
  /** Details of a classified error for a LeafError (e.g. `{ mysql: kind, errno }`). */
  details(info: HostErrorInfo): Record<string, unknown>;
}

/** Counters of a SQL segment store, for monitoring and benches. */
export interface HostedStoreStats {
  /** Statements sent to a server (a range is one). */
  roundTrips: number;
  /** Ranges taken. */
  rangesTaken: number;
  /** Times the store moved to another host (failure or read-only). */
  failovers: number;
  /**
   * Ranges refused because another listed host was writable too (a split brain): taken on one host
   * and never handed out. Non-zero means two servers take writes: alert on it.
   */
  splitBrainRefusals: number;
  /**
   * Ranges refused because the row was damaged or the max id was behind a range this store already
   * took (moved back, or a stale primary after a failover); nothing was changed on the server.
   */
  rangeRefusals: number;
  /** Give-backs made (the max id set back to the first unused id). */
  givenBack: number;
  /** Give-backs not made because a range was taken after the one given back (nothing changed). */
  giveBacksRefused: number;
  /**
   * Writes that set a value (give-back, create, step change, delete) sent once and never answered
   * (a timeout, a lost connection): not sent again, since a copy may still run on the server.
   */
  writesUnanswered: number;
  /** Index in the host list of the host in use. */
  currentHost: number;
  hosts: string[];
}

/**
 * What a store's range statement found on a host: the row after it moved the max id (`taken`), or
 * the row as it is when the statement changed nothing (`unchanged`: refused or about to overflow).
 */
export type RangeAttempt =
  | { taken: { maxId: bigint; tableStep: number } }
  | { unchanged: { maxId: bigint; step: unknown } };

/** Options of {@link HostedRanges}. */
export interface HostedRangesOptions<Conn> {
  driver: HostDriver<Conn>;
  /** "table leaf_alloc of database leaf": where a tag lives, for messages. */
  where: string;
  /** The store's name in the CLOSED error: "the MySQL segment store". */
  name: string;
}

/**
 * The part of a SQL segment store that is not SQL: the host failover loop, the once-only writes,
 * the range checks (damaged rows, a max id behind this instance's ranges, a split brain), the
 * give-back's ownership check, and the counters.
 */
export class HostedRanges<Conn> {
  private readonly driver: HostDriver<Conn>;
  private readonly where: string;
  private readonly name: string;
  private current = 0;
  private closed = false;
  private readonly counters = {
    roundTrips: 0,
    rangesTaken: 0,
    failovers: 0,
    splitBrainRefusals: 0,
    rangeRefusals: 0,
    givenBack: 0,
    giveBacksRefused: 0,
    writesUnanswered: 0,
  };
  /** Ends of the ranges this store handed out, per tag, with the host each came from. */
  private readonly floors = new RangeFloors();

  constructor(options: HostedRangesOptions<Conn>) {
    this.driver = options.driver;
    this.where = options.where;
    this.name = options.name;
  }

  /** Counts a statement sent to a server. */
  countRoundTrip(): void {
    this.counters.roundTrips++;
  }

  /** Whether {@link close} was called. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** Marks the store closed: every later call rejects with CLOSED. Answers false when it was. */
  close(): boolean {
    if (this.closed) return false;
    this.closed = true;
    return true;
  }

  /** The counters, with the host in use. */
  stats(): HostedStoreStats {
    return {
      ...this.counters,
      currentHost: this.current,
      hosts: [...this.driver.hostNames],
    };
  }

  /**
   * Takes a range of `tag`: `attempt` runs the store's statement on a host (with the lowest max id
   * this store may accept, the end of every range it handed out before the call) and answers what
   * it found. A row that did not move is refused (CORRUPT_DATA: a damaged row, a max id moved back,
   * a stale primary) or overflows (TAG_EXHAUSTED). With several hosts, every other listed host is
   * then asked whether it is writable: if one is, the range is discarded (a gap) and the call
   * rejects with UNAVAILABLE, `details.reason` "split-brain".
   *
   * Unlike the other writes, a range is tried again on a timeout or a lost connection: its
   * statement only adds to the max id, so a copy the server still runs later moves the max id past
   * a range nobody is answered (a gap); the range answered comes from the copy whose result was
   * read.
   */
  async takeRange(
    tag: string,
    step: number | undefined,
    attempt: (conn: Conn, floor: bigint) => Promise<RangeAttempt>,
    given?: bigint,
  ): Promise<SegmentRange> {
    checkTag(tag);
    if (step !== undefined) checkStep(step);
    // Ranges handed out before this call were committed before its statement runs, so a healthy
    // row is at or above their ends; ranges of calls still in flight may end higher in any order.
    // The caller's floor (its high-water mark) may be higher: a node restarted remembers it.
    const { floor, mark } = floorOf(this.floors, tag, given);
    const { range, host } = await this.run(
      `taking a range of tag ${JSON.stringify(tag)}`,
      async (conn, host) => {
        const found = await attempt(conn, floor);
        if ("unchanged" in found) {
          throw this.unchanged(tag, found.unchanged, floor, host, step, mark);
        }
        const { maxId, tableStep } = found.taken;
        const used = step ?? tableStep;
        const range = { tag, start: maxId - BigInt(used), end: maxId, step: used, tableStep };
        return { range, host };
      },
    );
    const hostNames = this.driver.hostNames;
    if (hostNames.length > 1) {
      const writable = await this.otherWritableHosts(host);
      if (writable.length > 0) {
        this.counters.splitBrainRefusals++;
        const hosts = [hostNames[host]!, ...writable];
        throw new LeafError({
          component: COMPONENT,
          code: ErrorCodes.UNAVAILABLE,
          message:
            `split brain: ${hosts.length} listed ${this.driver.product} hosts are writable (${hosts.join(", ")}); refused range ` +
            `[${range.start}, ${range.end}) of tag ${JSON.stringify(tag)} taken on ${hosts[0]} (a gap, never handed out). ` +
            `Only the primary may be writable: make the others read-only (${this.driver.makeReadOnly}) or take them ` +
            "out of the host list; ranges resume once one host is writable",
          details: { reason: "split-brain", tag, writableHosts: hosts },
        });
      }
    }
    this.floors.raise(tag, range.end, hostNames[host]!, range.start);
    this.counters.rangesTaken++;
    return range;
  }

  /**
   * Gives back `[from, end)` of `tag` (see `SegmentStore.giveBack`): only ids of ranges this store
   * handed out back to back up to its last one (INVALID_ARGUMENT otherwise); false at once when a
   * later range was handed out. `attempt`, the store's compare-and-set, is sent at most once, after
   * a `SELECT 1` (see {@link write}). Answers whether it was given back.
   */
  async giveBack(
    tag: string,
    from: bigint,
    end: bigint,
    attempt: (conn: Conn) => Promise<boolean>,
  ): Promise<boolean> {
    if (this.floors.checkGiveBack(tag, from, end) === "moved-on") {
      this.counters.giveBacksRefused++;
      return false;
    }
    const given = await this.write(
      `giving back ids [${from}, ${end}) of tag ${JSON.stringify(tag)}`,
      attempt,
    );
    if (given) {
      this.floors.lower(tag, from);
      this.counters.givenBack++;
    } else {
      this.counters.giveBacksRefused++;
    }
    return given;
  }

  /**
   * A write that sets a value (a give-back, a new tag, a step, a delete), sent at most once:
   * `probe` (statements that change nothing, tried again like reads; default `SELECT 1`) runs first
   * on the connection, so that a dead pooled connection fails before the write, then `body` once.
   * Once `body` has sent a statement, any failure but a read-only answer is final, and one without
   * an answer from the server (or with the statement interrupted on the server) is UNAVAILABLE with
   * `details.reason` "outcome-unknown": a copy the server still holds (queued behind a row lock,
   * say) could run after other changes, so it is never sent again.
   */
  write<T>(
    what: string,
    body: (conn: Conn, host: number) => Promise<T>,
    probe: (conn: Conn) => Promise<void> = (conn) => this.driver.execute(conn, "SELECT 1"),
  ): Promise<T> {
    return this.run(what, body, probe);
  }

  /** Runs `statements` (`CREATE TABLE IF NOT EXISTS ...`) on a writable host. */
  async createSchema(statements: string[]): Promise<void> {
    await this.run("creating the table", async (conn) => {
      await this.driver.checkWritable(conn);
      for (const sql of statements) await this.driver.execute(conn, sql);
    });
  }

  /**
   * Checks, on the host in use, what taking ranges needs: `statements` (a `SELECT` of the table's
   * columns and a no-op `UPDATE ... WHERE 1 = 0`, which the server checks for privileges though no
   * row matches) run, and the server takes writes. Rejects with INVALID_CONFIG naming what to fix
   * (access, schema), or UNAVAILABLE when no listed host answers writable.
   */
  async checkAccess(statements: string[]): Promise<void> {
    await this.run("checking access to the table", async (conn) => {
      for (const sql of statements) await this.driver.execute(conn, sql);
      await this.driver.checkWritable(conn);
    });
  }

  /**
   * Runs `body` on a connection to the host in use; on a connection failure, a timeout or a
   * read-only server, moves to the next host and stays there (a lone host gets a second try, for a
   * pooled connection the server dropped). LeafErrors from `body` (unknown tag, exists, overflow),
   * configuration errors (access denied, missing database, table or column: INVALID_CONFIG) and
   * errors about the statement itself are final. All hosts failing gives UNAVAILABLE, each host
   * named once with what it answered. The connection is dropped on any failure, which rolls back
   * a transaction `body` left open. With `once`, see {@link write}.
   */
  async run<T>(
    what: string,
    body: (conn: Conn, host: number) => Promise<T>,
    once?: (conn: Conn) => Promise<void>,
  ): Promise<T> {
    if (this.closed) throw closedError(this.name);
    const { driver } = this;
    const n = driver.hostNames.length;
    const attempts = n === 1 ? 2 : n;
    const failures = new Map<string, { error: unknown; info: HostErrorInfo }>();
    for (let i = 0; i < attempts; i++) {
      const index = (this.current + i) % n;
      let conn: Conn;
      try {
        conn = await driver.connect(index);
      } catch (error) {
        if (this.closed) throw closedError(this.name);
        failures.set(driver.hostNames[index]!, this.failure(error, what, index));
        continue;
      }
      let sent = false;
      try {
        if (once) {
          await once(conn);
          sent = true;
        }
        const result = await body(conn, index);
        driver.release(conn);
        if (index !== this.current) {
          this.current = index;
          this.counters.failovers++;
        }
        return result;
      } catch (error) {
        // A LeafError or a read-only answer comes after every statement ran: the connection is
        // clean. A failed statement, or a once-only write's refusal, may leave a transaction open:
        // that connection is dropped.
        const readOnly =
          error instanceof ReadOnlyHost ||
          (!(error instanceof LeafError) && driver.classify(error).kind === "read-only");
        if (!sent && (error instanceof LeafError || error instanceof ReadOnlyHost)) {
          driver.release(conn);
        } else {
          driver.destroy(conn);
        }
        if (error instanceof LeafError) throw error;
        if (sent && !readOnly) throw this.unanswered(error, what, index);
        failures.set(driver.hostNames[index]!, this.failure(error, what, index));
      }
    }
    const all = [...failures];
    // A configuration error (access denied, missing database or table) on some host is what the
    // operator must fix; one host alone says what is wrong (unreachable, read-only) and what to do.
    const config = all.find(([, f]) => f.info.kind === "access" || f.info.kind === "schema");
    if (config || all.length === 1) {
      const [host, { error }] = config ?? all[0]!;
      throw driver.toError(error, what, host);
    }
    const seen = all.map(([host, f]) => `${host}: ${f.info.kind} (${f.info.text})`);
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `no writable ${driver.product} host answered while ${what} (${seen.join("; ")}); check that the primary is up and not read-only, and that ${driver.serverOption} lists it`,
      details: {
        hosts: driver.hostNames,
        failures: seen,
        unreachable: all.every(([, f]) => f.info.kind === "unreachable"),
      },
      cause: all[all.length - 1]![1].error,
    });
  }

  /** Why a row that the range statement did not move gives no range. */
  private unchanged(
    tag: string,
    row: { maxId: bigint; step: unknown },
    floor: bigint,
    host: number,
    step: number | undefined,
    mark: boolean,
  ): Error {
    const name = this.driver.hostNames[host]!;
    const where = `${this.where} on ${name}`;
    const stored = Number(row.step);
    let refusal: LeafError | undefined;
    if (!(Number.isInteger(stored) && stored >= 1 && stored <= MAX_STEP)) {
      refusal = badStoredStep(tag, row.step, where);
    } else if (row.maxId < 0n) {
      refusal = badStoredMaxId(tag, row.maxId, where);
    } else if (row.maxId < floor) {
      const from = this.floors.source(tag);
      refusal = maxIdMovedBack(
        tag,
        row.maxId,
        floor,
        where,
        from === undefined || from === name || mark ? { mark } : { stale: { host: name, from } },
      );
    }
    if (refusal) {
      this.counters.rangeRefusals++;
      return refusal;
    }
    const used = step ?? stored;
    if (row.maxId > MAX_ID - BigInt(used)) return rangeOverflow(tag, row.maxId, used);
    // Moved by another process between the statement and the read: worth another try.
    return new Error(`the row of tag ${JSON.stringify(tag)} did not change`);
  }

  /**
   * The listed hosts other than `used` that answer as writable now. A host that cannot be reached
   * within the timeouts is not counted: this store cannot tell whether others reach it (a network
   * partition needs the database's own fencing).
   */
  private async otherWritableHosts(used: number): Promise<string[]> {
    const { hostNames } = this.driver;
    const answers = await Promise.all(
      hostNames.map(async (name, index) =>
        index !== used && (await this.isWritable(index)) ? name : false,
      ),
    );
    return answers.filter((name): name is string => name !== false);
  }

  /** Whether host `index` answers now as writable; false when read-only or unreachable. */
  private async isWritable(index: number): Promise<boolean> {
    let conn: Conn;
    try {
      conn = await this.driver.connect(index);
    } catch {
      return false;
    }
    try {
      await this.driver.checkWritable(conn);
      this.driver.release(conn);
      return true;
    } catch (error) {
      if (error instanceof ReadOnlyHost) this.driver.release(conn);
      else this.driver.destroy(conn);
      return false;
    }
  }

  /**
   * The final error of a once-only write that failed after it was sent: the server's own error
   * when it refused the statement (nothing was changed), otherwise "outcome-unknown": no answer,
   * or the statement interrupted on the server, which may come after a commit the client never
   * heard of.
   */
  private unanswered(error: unknown, what: string, index: number): LeafError {
    const { driver } = this;
    const host = driver.hostNames[index]!;
    const info = driver.classify(error);
    const interrupted = info.kind === "interrupted";
    if (info.kind !== "unreachable" && !interrupted && info.serverCode !== undefined) {
      return driver.toError(error, what, host);
    }
    this.counters.writesUnanswered++;
    const code = info.serverCode === undefined ? "" : `, ${info.serverCode}`;
    const happened = interrupted
      ? `${driver.product} host ${host} interrupted the statement while ${what} (${info.text}${code}): it was sent and may have taken effect`
      : `no answer from ${driver.product} host ${host} while ${what} (${info.text}): the statement was sent and may still run on the server (queued behind a row lock, say)`;
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message:
        `${happened}, so it is not sent again: run twice, it ` +
        "could undo a change made in between. Whether it took effect shows in the table once the server " +
        "answers; ids of a give-back that failed are a gap, never handed out",
      details: { reason: "outcome-unknown", host, ...driver.details(info) },
      cause: error,
    });
  }

  /**
   * Classifies a host's failure; throws when it is final (a statement the server refuses, or a
   * configuration error with one host), returns it when the next host may do better (with several
   * hosts, one may lack the grants or the table that the primary has).
   */
  private failure(
    error: unknown,
    what: string,
    index: number,
  ): { error: unknown; info: HostErrorInfo } {
    const { driver } = this;
    const info = driver.classify(error);
    const config = info.kind === "access" || info.kind === "schema";
    const final =
      (config && driver.hostNames.length === 1) || (info.kind === "statement" && !info.transient);
    if (final) throw driver.toError(error, what, driver.hostNames[index]!);
    return { error, info };
  }
}
