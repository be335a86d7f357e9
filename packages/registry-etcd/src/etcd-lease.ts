// One node's hold on its worker ids: an etcd lease it renews itself, holder keys attached to it,
// and every write guarded by "my holder keys still hold my token". It fences on its own monotonic
// clock, from the send time of the last renewal etcd confirmed, before etcd can expire the lease.
import { type BackupWorker, ErrorCodes, isLeafError, type LeafError } from "@leaf/core";
import { type FenceReason, type RenewalConfirmed, RenewingLease } from "@leaf/core/adapter";
import type { IResponseOp } from "etcd3";
import type { EtcdCalls, GrantedLease } from "./etcd-calls";
import {
  COMPONENT,
  encodeRecord,
  type IdRecord,
  type Keyspace,
  recordOf,
  type Stored,
  stored,
} from "./etcd-keys";

/** A worker id won by acquire: what etcd held for it, and the record written when it was won. */
export interface ClaimedId {
  workerId: number;
  /** The floor the holder starts after (the folded record's timestamp). */
  lastTimestamp: number;
  /** The record as written by the claim. */
  record: IdRecord;
  /** The record key's revision after the claim wrote it: the next write's guard compares it. */
  modRevision: string;
}

/** What an {@link EtcdLease} is built from. */
export interface EtcdLeaseInit {
  calls: EtcdCalls;
  keys: Keyspace;
  etcdLease: GrantedLease;
  /** The holder keys' value (with this acquire's token). */
  holderText: string;
  /** The primary first, then the backups. */
  claimed: ClaimedId[];
  /** performance.now() when the lease grant was sent: the fence counts from it. */
  grantSentAt: number;
  renewIntervalMs: number;
  fenceMarginMs: number;
  /** Called once when the lease ends (lost or released), so the registry stops tracking it. */
  onEnd(lease: EtcdLease): void;
}

/**
 * The ids of one acquire, held under one etcd lease. etcd expires the lease no earlier than its TTL
 * after it received the last keepalive, which is after this holder sent it: fencing at send time +
 * TTL - margin (RenewingLease's deadline, with the TTL etcd applied) is before etcd can give the id
 * to anyone. The margin covers clock rate differences and the generator's last tick.
 */
export class EtcdLease extends RenewingLease {
  readonly #calls: EtcdCalls;
  readonly #keys: Keyspace;
  readonly #etcdLease: GrantedLease;
  readonly #holderText: string;
  readonly #onEnd: (lease: EtcdLease) => void;
  /** Each held id's record as this holder last wrote it (nobody else writes it while held). */
  readonly #records = new Map<number, IdRecord>();
  /**
   * Each held id's record revision after this holder's last write it knows landed. Every write is
   * guarded by it, so a write of this holder that reaches etcd after a later one (its answer timed
   * out, it took a slow path) fails there instead of putting back an older timestamp and horizon.
   */
  readonly #revisions = new Map<number, string>();
  /** True when the registry was closed: nothing is revoked, the lease is left to expire. */
  #leftToExpire = false;

  constructor(init: EtcdLeaseInit) {
    const [primary, ...backups] = init.claimed;
    super(
      {
        component: COMPONENT,
        workerId: primary!.workerId,
        lastTimestamp: primary!.lastTimestamp,
        backups: backups.map(
          (b): BackupWorker => ({ workerId: b.workerId, lastTimestamp: b.lastTimestamp }),
        ),
      },
      {
        leaseMs: init.etcdLease.ttlMs,
        safetyMarginMs: init.fenceMarginMs,
        renewIntervalMs: init.renewIntervalMs,
        sentAt: init.grantSentAt,
        // What the claims stored: the next holder starts after it.
        horizon: Math.min(...init.claimed.map((c) => c.record.horizon)),
      },
    );
    this.#calls = init.calls;
    this.#keys = init.keys;
    this.#etcdLease = init.etcdLease;
    this.#holderText = init.holderText;
    this.#onEnd = init.onEnd;
    for (const c of init.claimed) {
      this.#records.set(c.workerId, c.record);
      this.#revisions.set(c.workerId, c.modRevision);
    }
  }

  /** The etcd lease id (decimal) the holder keys are attached to. */
  get etcdLeaseId(): string {
    return this.#etcdLease.id;
  }

  /** performance.now() when the last renewal etcd confirmed was sent (the grant's, at first). */
  get renewedAt(): number {
    return this.lastRenewedAt;
  }

  /** The TTL (ms) etcd applied at the last confirmed renewal. */
  get ttlMs(): number {
    return this.leaseMs;
  }

  /** Ends the lease when the registry closes: no renewals any more, so etcd will expire it. */
  closeByRegistry(): void {
    this.#leftToExpire = true;
    this.lose("the registry was closed, so nothing renews its etcd lease any more");
  }

  /** A report writes the records' timestamps apart from the renewals (which move horizons). */
  protected override async store(reported: ReadonlyMap<number, number>): Promise<void> {
    const next = new Map<number, IdRecord>();
    for (const workerId of reported.keys()) {
      const record = this.#records.get(workerId)!;
      next.set(workerId, {
        ...record,
        timestamp: Math.max(record.timestamp, this.highest(workerId)),
      });
    }
    await this.#write("store the reported timestamps", next);
  }

  /**
   * Deletes the holder keys and writes each record's timestamp; the horizon drops to what a final
   * report covers (nothing beyond it) or to now. Then revokes the etcd lease.
   */
  protected async releaseOnce(finalTimestampMs: number | undefined): Promise<void> {
    const now = Date.now();
    const next = new Map<number, IdRecord>();
    for (const workerId of this.heldIds()) {
      const record = this.#records.get(workerId)!;
      next.set(workerId, {
        ...record,
        timestamp: Math.max(record.timestamp, this.highest(workerId)),
        // A final report covers every id issued: nothing beyond it. Without one, ids may have been
        // issued up to now, never after the release.
        horizon: finalTimestampMs !== undefined ? 0 : Math.min(record.horizon, now),
      });
    }
    try {
      await this.#write("release the worker ids", next, { release: true });
    } finally {
      this.#onEnd(this);
    }
    // The holder keys are gone already; revoking only saves etcd the expiry.
    await this.#calls.revoke(this.#etcdLease.id).catch(() => {});
  }

  protected override onLost(reason: LeafError): void {
    super.onLost(reason);
    this.#onEnd(this);
    if (!this.#leftToExpire) {
      // Frees the ids sooner when etcd is still reachable; the records keep this holder's horizon.
      void this.#calls.revoke(this.#etcdLease.id).catch(() => {});
    }
  }

  /**
   * One renewal: a keepalive, then the records' horizons moved to what the new deadline allows.
   * It is confirmed (the fence and the lease's horizon move) only when both succeeded, so no id is
   * ever issued beyond a stored horizon, also when the wall clock steps forward after it. Resolves
   * with the TTL etcd applied and the horizon now stored for every held id.
   */
  protected async renewOnce(): Promise<RenewalConfirmed | undefined> {
    const wallAt = Date.now();
    const ttlMs = await this.#calls.keepAlive(this.#etcdLease.id);
    if (this.lost.aborted) throw this.lost.reason;
    if (this.released) return undefined;
    if (ttlMs <= 0) {
      throw this.lose(
        `etcd says its lease ${this.#etcdLease.id} no longer exists (it expired or was revoked)`,
      );
    }
    const horizon = wallAt + ttlMs - this.safetyMarginMs;
    const next = new Map<number, IdRecord>();
    for (const workerId of this.heldIds()) {
      const record = this.#records.get(workerId)!;
      next.set(workerId, { ...record, horizon: Math.max(record.horizon, horizon) });
    }
    await this.#write("renew the worker ids", next);
    return { leaseMs: ttlMs, horizon: Math.min(...[...next.values()].map((r) => r.horizon)) };
  }

  /** No renewal confirmed for TTL - margin: etcd may expire the lease soon. */
  protected fenced(silentMs: number): FenceReason {
    return {
      why:
        `no renewal confirmed by etcd for ${silentMs} ms (lease TTL ${this.leaseMs} ms, fence ` +
        `margin ${this.safetyMarginMs} ms), so etcd may soon give the id to another node`,
      details: { etcdLease: this.#etcdLease.id, ttlMs: this.leaseMs },
    };
  }

  /**
   * Writes `records` in one transaction guarded by every held id's holder key still holding this
   * holder's token and each record still at the revision this holder last wrote; with `release`,
   * deletes the holder keys too. A failed holder guard loses the lease. A record found at another
   * revision while the holder keys are still this holder's can only hold a write of this holder
   * whose answer was lost (timed out) and that landed since: the write is made again over it, each
   * value the higher of the two (a release's horizon as the release says), at most twice.
   */
  async #write(
    what: string,
    records: ReadonlyMap<number, IdRecord>,
    { release = false } = {},
  ): Promise<void> {
    let next = records;
    for (let attempt = 0; ; attempt++) {
      const found = await this.#writeOnce(what, next, release);
      if (found === undefined) return;
      if (attempt === 2) {
        throw this.lose(
          `its records in etcd kept changing under its writes (${what}), though its holder keys are its own`,
          { workerId: [...found.keys()][0] },
        );
      }
      const merged = new Map<number, IdRecord>();
      for (const [id, record] of next) {
        const now = found.get(id);
        // A record deleted by hand: written again (`Mod == 0` guards a missing key).
        this.#revisions.set(id, now?.modRevision ?? "0");
        const there = readableRecord(now);
        if (there === undefined) {
          merged.set(id, record);
          continue;
        }
        const higher = {
          ...record,
          timestamp: Math.max(record.timestamp, there.timestamp),
          horizon: Math.max(record.horizon, there.horizon),
        };
        // What etcd holds at the revision now compared is at least what it says: the next write
        // starts from it, so that none puts back a lower horizon than the one found.
        if (!release) this.#records.set(id, higher);
        merged.set(id, release ? { ...higher, horizon: record.horizon } : higher);
      }
      next = merged;
    }
  }

  /**
   * One guarded transaction of {@link #write}. Resolves undefined when it was applied; with the
   * records as etcd holds them when only their revisions differed; throws (and loses the lease)
   * when a holder key is not this holder's.
   */
  async #writeOnce(
    what: string,
    records: ReadonlyMap<number, IdRecord>,
    release: boolean,
  ): Promise<Map<number, Stored> | undefined> {
    const client = this.#calls.client;
    const held = this.heldIds();
    const texts = new Map([...records].map(([id, r]) => [id, encodeRecord(r)]));
    const answer = await this.#calls.run(what, () => {
      const [first, ...rest] = held;
      let txn = client.if(this.#keys.holder(first!), "Value", "==", this.#holderText);
      for (const id of rest) txn = txn.and(this.#keys.holder(id), "Value", "==", this.#holderText);
      for (const id of texts.keys()) {
        txn = txn.and(this.#keys.record(id), "Mod", "==", this.#revisions.get(id) ?? "0");
      }
      const puts = [...texts].map(([id, text]) => client.put(this.#keys.record(id)).value(text));
      const deletes = release ? held.map((id) => client.delete().key(this.#keys.holder(id))) : [];
      return txn
        .then(...puts, ...deletes)
        .else(
          ...held.map((id) => client.get(this.#keys.holder(id))),
          ...[...texts.keys()].map((id) => client.get(this.#keys.record(id))),
        )
        .options(this.#calls.options())
        .commit();
    });
    if (answer.succeeded) {
      for (const [id, record] of records) {
        this.#records.set(id, record);
        this.#revisions.set(id, String(answer.header.revision));
      }
      return undefined;
    }
    const holders = answer.responses.slice(0, held.length).map(rangeValue);
    const found = new Map<number, Stored>();
    [...texts.keys()].forEach((id, i) => {
      const kv = answer.responses[held.length + i]?.response_range?.kvs[0];
      if (kv) found.set(id, stored(this.#keys.record(id), kv));
    });
    // A client that retries may have applied this very write before: the records hold its text
    // (and, for a release, the holder keys are gone).
    const applied = [...texts].every(([id, text]) => found.get(id)?.text === text);
    if (applied && release && holders.every((h) => h === undefined)) return undefined;
    const index = holders.findIndex((h) => h !== this.#holderText);
    if (applied && index < 0) {
      for (const [id, record] of records) {
        this.#records.set(id, record);
        this.#revisions.set(id, found.get(id)!.modRevision);
      }
      return undefined;
    }
    if (index < 0) return found;
    const workerId = held[index]!;
    const why =
      holders[index] === undefined
        ? "its holder key in etcd is gone (the etcd lease expired or was revoked, or the key was deleted)"
        : "its holder key in etcd names another holder";
    throw this.lose(why, { workerId, details: { key: this.#keys.holder(workerId) } });
  }
}

/** The value of a range answer inside a transaction, or undefined when the key is absent. */
function rangeValue(op: IResponseOp): string | undefined {
  const kv = op.response_range?.kvs[0];
  return kv ? kv.value.toString() : undefined;
}

/**
 * The record of `s`, or undefined when it is missing or not a record. While this holder's keys
 * hold the id, nobody else writes its record: text that is not a record was put there by hand, and
 * this holder's own values (at least the floor it started from, which it read when it took the id)
 * are written over it, as over a record deleted by hand. Refusing instead would stop every report
 * and horizon write until the lease ran out.
 */
function readableRecord(s: Stored | undefined): IdRecord | undefined {
  try {
    return recordOf(s);
  } catch (error) {
    if (isLeafError(error, ErrorCodes.CORRUPT_DATA)) return undefined;
    throw error;
  }
}
