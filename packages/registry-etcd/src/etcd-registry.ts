// Worker ids from etcd v3: an acquire grants an etcd lease, then wins ids one transaction each
// ("create the holder key only if absent", attached to the lease), folding what a vanished holder
// may have issued into the id's record. Renewals, fencing and release live in EtcdLease.
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { performance } from "node:perf_hooks";
import {
  type AcquireRequest,
  configError,
  ErrorCodes,
  LeafError,
  type WorkerIdRegistry,
  type WorkerLease,
} from "@leaf/core";
import { type CheckedAcquireRequest, checkAcquireRequest, checkBackend } from "@leaf/core/adapter";
import { noop } from "cockatiel";
import { Etcd3 } from "etcd3";
import { EtcdCalls, type GrantedLease } from "./etcd-calls";
import {
  COMPONENT,
  encodeRecord,
  floorOf,
  type HolderValue,
  type IdRecord,
  Keyspace,
  recordOf,
  type Stored,
  stored,
} from "./etcd-keys";
import { type ClaimedId, EtcdLease } from "./etcd-lease";

/** Options of {@link EtcdRegistry}. */
export interface EtcdRegistryOptions {
  /**
   * etcd's client URL, or several separated by commas: `http://10.0.0.5:2379,http://10.0.0.6:2379`
   * (https:// is checked against the system's CA roots; for your own CA or client certificates give
   * a `client`). The registry builds the client and closes it in close(). Give `url` or `client`.
   */
  url?: string;
  /** An `etcd3` client you built and keep (TLS, auth, policies): the registry never closes it. */
  client?: Etcd3;
  /** Prefix of every key (default "/leaf/worker-ids"); each service gets `<prefix>/<service>/`. */
  prefix?: string;
  /** TTL of the etcd lease, whole seconds (default 10); etcd may raise it to its minimum. */
  leaseTtlSeconds?: number;
  /** How often a holder renews its lease, ms (default a third of the TTL). */
  renewIntervalMs?: number;
  /**
   * How long before the lease could expire in etcd the holder stops issuing ids, ms (default
   * 1,000, at most a quarter of the TTL).
   */
  fenceMarginMs?: number;
  /** Deadline of each etcd call, ms (default 2,000). */
  requestTimeoutMs?: number;
}

const DEFAULT_PREFIX = "/leaf/worker-ids";
const DEFAULT_TTL_SECONDS = 10;
const DEFAULT_REQUEST_TIMEOUT_MS = 2000;

/** What {@link EtcdRegistry} settled from its options (defaults applied). */
export interface EtcdRegistrySettings {
  prefix: string;
  ttlSeconds: number;
  renewIntervalMs: number;
  fenceMarginMs: number;
  requestTimeoutMs: number;
}

/**
 * A {@link WorkerIdRegistry} on etcd v3. Each acquire holds its ids under one etcd lease that it
 * renews; the holder fences before etcd can expire it. Each id's record (highest reported
 * timestamp, the holder's horizon) stays in etcd after release, so the next holder starts after it.
 */
export class EtcdRegistry implements WorkerIdRegistry {
  readonly kind = "etcd";
  readonly #calls: EtcdCalls;
  readonly #owned: Etcd3 | undefined;
  readonly #settings: EtcdRegistrySettings;
  readonly #leases = new Set<EtcdLease>();
  #closed = false;

  /**
   * Checks the options (INVALID_CONFIG naming the option, the value and what is expected); does
   * no I/O: the first acquire() connects.
   */
  constructor(options: EtcdRegistryOptions) {
    const backend = checkBackend<Etcd3>(options, {
      component: COMPONENT,
      url: "etcd client URLs http://host:port[,http://host:port...]",
      isUrl: (value): value is string =>
        typeof value === "string" && parseHosts(value) !== undefined,
      client: { what: "an etcd3 client (new Etcd3({ hosts }))", is: isEtcdClient },
    });
    this.#settings = settle(options);
    const timeout = this.#settings.requestTimeoutMs;
    if (backend.client) {
      this.#calls = new EtcdCalls(backend.client, timeout, "the given client");
    } else {
      const hosts = parseHosts(backend.url)!;
      // No global retries: a renewal that fails is retried by the next one, and a retried
      // transaction may have been applied already. Each host keeps etcd3's circuit breaker, which
      // is also what moves calls to another host.
      this.#owned = new Etcd3({ hosts, dialTimeout: timeout, faultHandling: { global: noop } });
      this.#calls = new EtcdCalls(this.#owned, timeout, hosts.join(","));
    }
  }

  /** The settled lease timing (defaults applied), for monitoring and tests. */
  get settings(): Readonly<EtcdRegistrySettings> {
    return this.#settings;
  }

  async acquire(request: AcquireRequest): Promise<WorkerLease> {
    if (this.#closed) throw closedError();
    const checked = checkAcquireRequest(COMPONENT, request, { requestedWorkerId: true });
    const keys = new Keyspace(this.#settings.prefix, checked.node.name);
    const grantSentAt = performance.now();
    const grantWallAt = Date.now();
    const etcdLease = await this.#calls.grant(this.#settings.ttlSeconds);
    const holder: HolderValue = {
      token: randomUUID(),
      node: checked.key,
      host: hostname(),
      pid: process.pid,
      lease: etcdLease.id,
      since: new Date(grantWallAt).toISOString(),
    };
    const claim: Claim = {
      keys,
      etcdLease,
      holderText: JSON.stringify(holder),
      node: checked.key,
      horizon: grantWallAt + etcdLease.ttlMs - this.#settings.fenceMarginMs,
    };
    const claimed: ClaimedId[] = [];
    try {
      await this.#claimIds(checked, claim, claimed);
      // A grant that took most of the TTL would give a lease that is already fencing.
      const left = grantSentAt + etcdLease.ttlMs - this.#settings.fenceMarginMs - performance.now();
      if (left <= this.#settings.renewIntervalMs / 2) {
        throw this.#calls.unavailable(
          "acquire a worker id",
          new Error(
            `the acquire took so long that only ${Math.round(left)} ms of the lease were left`,
          ),
        );
      }
      if (this.#closed) throw closedError();
      const lease = new EtcdLease({
        calls: this.#calls,
        keys,
        etcdLease,
        holderText: claim.holderText,
        claimed,
        grantSentAt,
        renewIntervalMs: this.#settings.renewIntervalMs,
        fenceMarginMs: this.#settings.fenceMarginMs,
        onEnd: (l) => this.#leases.delete(l),
      });
      this.#leases.add(lease);
      return lease;
    } catch (error) {
      await this.#giveBack(claim, claimed).catch(() => {});
      await this.#calls.revoke(etcdLease.id).catch(() => {});
      throw error;
    }
  }

  /**
   * Stops the renewals of every lease still held and aborts their `lost` (nothing keeps other
   * nodes off those ids once their etcd leases expire); closes the client the registry built.
   * Does not release: call `release` first. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const lease of [...this.#leases]) lease.closeByRegistry();
    this.#owned?.close();
  }

  /**
   * Wins `1 + backups` ids: the node's former ids first, then the lowest free ones; or exactly the
   * requested id, else WORKER_ID_IN_USE naming its holder.
   */
  async #claimIds(checked: CheckedAcquireRequest, claim: Claim, claimed: ClaimedId[]) {
    const { keys } = claim;
    const held = new Map<number, string>();
    const records = new Map<number, Stored>();
    for (const kv of await this.#calls.list(keys.root)) {
      const key = kv.key.toString();
      const parsed = keys.parse(key);
      if (parsed?.kind === "holder") held.set(parsed.workerId, kv.value.toString());
      if (parsed?.kind === "id") records.set(parsed.workerId, stored(key, kv));
    }
    if (checked.workerId !== undefined) {
      const workerId = checked.workerId;
      const won = held.has(workerId)
        ? undefined
        : await this.#claim(claim, workerId, records.get(workerId));
      if (won) {
        claimed.push(won);
        return;
      }
      // Held when listed, or taken between the list and the claim: name the holder either way.
      const holderText =
        held.get(workerId) ?? (await this.#calls.get(keys.holder(workerId)))?.value.toString();
      throw this.#inUse(checked, keys, workerId, holderText);
    }
    const wanted = checked.backups + 1;
    for (const workerId of candidates(checked, held, records)) {
      if (claimed.length >= wanted) break;
      checked.signal?.throwIfAborted();
      const won = await this.#claim(claim, workerId, records.get(workerId));
      if (won) claimed.push(won);
    }
    if (claimed.length < wanted) {
      const { node, maxWorkerId } = checked;
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.WORKER_IDS_EXHAUSTED,
        message:
          `no free worker id in 0..${maxWorkerId} for ${checked.key} (service ${node.name}): ` +
          `${wanted} needed (${checked.backups} backups), ${claimed.length} free in etcd under ` +
          `${keys.root}. Stop a node, wait up to ${this.#settings.ttlSeconds} s for the leases of ` +
          "vanished nodes to expire, or use a layout with more worker bits",
        details: { maxWorkerId, backups: checked.backups, prefix: keys.root },
      });
    }
  }

  /** WORKER_ID_IN_USE for a requested id whose holder key names another holder. */
  #inUse(
    checked: CheckedAcquireRequest,
    keys: Keyspace,
    workerId: number,
    holderText: string | undefined,
  ): LeafError {
    let holder = "another holder";
    try {
      const value = JSON.parse(holderText ?? "") as Partial<HolderValue>;
      holder = `${value.node} (host ${value.host}, pid ${value.pid}, since ${value.since})`;
    } catch {
      // An unreadable holder key still holds the id: the message just cannot name its holder.
    }
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.WORKER_ID_IN_USE,
      message:
        `worker id ${workerId} requested by ${checked.key} is held in etcd by ${holder}; stop that ` +
        "node (a pod with the same StatefulSet ordinal still running?) and start this one again: " +
        `its etcd lease (TTL ${this.#settings.ttlSeconds} s) ends once it stops renewing`,
      details: { workerId, holder: holderText, prefix: keys.root },
    });
  }

  /**
   * One id, one transaction: create its holder key (attached to the lease) only if absent and only
   * if its record is still the one read, and write the record with the vanished holder's horizon
   * folded into the timestamp and this holder's horizon. Undefined when another node holds it.
   */
  async #claim(
    claim: Claim,
    workerId: number,
    read: Stored | undefined,
  ): Promise<ClaimedId | undefined> {
    const client = this.#calls.client;
    const holderKey = claim.keys.holder(workerId);
    const recordKey = claim.keys.record(workerId);
    let current = read;
    for (let attempt = 0; attempt < 5; attempt++) {
      const floor = floorOf(recordOf(current));
      const record: IdRecord = { timestamp: floor, horizon: claim.horizon, node: claim.node };
      const answer = await this.#calls.run(`take worker id ${workerId}`, () =>
        client
          .if(holderKey, "Create", "==", 0)
          .and(recordKey, "Mod", "==", current?.modRevision ?? 0)
          .then(
            client.put(holderKey).value(claim.holderText).lease(claim.etcdLease.id),
            client.put(recordKey).value(encodeRecord(record)),
          )
          .else(client.get(holderKey), client.get(recordKey))
          .options(this.#calls.options())
          .commit(),
      );
      if (answer.succeeded) {
        return {
          workerId,
          lastTimestamp: floor,
          record,
          modRevision: String(answer.header.revision),
        };
      }
      const holderKv = answer.responses[0]?.response_range?.kvs[0];
      if (holderKv) {
        // A client that retries may have applied this very transaction before.
        if (holderKv.value.toString() !== claim.holderText) return undefined;
        const recordKv = answer.responses[1]?.response_range?.kvs[0];
        const now = recordKv ? stored(recordKey, recordKv) : undefined;
        return {
          workerId,
          lastTimestamp: floor,
          record: recordOf(now) ?? record,
          modRevision: now?.modRevision ?? "0",
        };
      }
      // Free, but its record changed since it was read (a late release): read it again.
      const recordKv = answer.responses[1]?.response_range?.kvs[0];
      current = recordKv ? stored(recordKey, recordKv) : undefined;
    }
    return undefined;
  }

  /** Undoes the ids won by an acquire that failed: nothing was issued under them. */
  async #giveBack(claim: Claim, claimed: readonly ClaimedId[]): Promise<void> {
    if (claimed.length === 0) return;
    const client = this.#calls.client;
    const [first, ...rest] = claimed;
    let txn = client.if(claim.keys.holder(first!.workerId), "Value", "==", claim.holderText);
    for (const c of rest)
      txn = txn.and(claim.keys.holder(c.workerId), "Value", "==", claim.holderText);
    await txn
      .then(
        ...claimed.map((c) =>
          client
            .put(claim.keys.record(c.workerId))
            .value(encodeRecord({ ...c.record, horizon: 0 })),
        ),
        ...claimed.map((c) => client.delete().key(claim.keys.holder(c.workerId))),
      )
      .options(this.#calls.options())
      .commit();
  }
}

/** What every claim of one acquire shares. */
interface Claim {
  keys: Keyspace;
  etcdLease: GrantedLease;
  holderText: string;
  node: string;
  /** The horizon the claim writes: the grant's send time (wall clock) + TTL - margin. */
  horizon: number;
}

/** The node a record names, or undefined for a record that cannot be read. */
function nodeOf(s: Stored): string | undefined {
  try {
    return recordOf(s)?.node;
  } catch {
    return undefined;
  }
}

/** The ids to try, in order: free ids this node had before, then every free id from 0 up. */
function* candidates(
  checked: CheckedAcquireRequest,
  held: ReadonlyMap<number, string>,
  records: ReadonlyMap<number, Stored>,
): Generator<number> {
  const own = [...records]
    .filter(([id, s]) => nodeOf(s) === checked.key && id <= checked.maxWorkerId && !held.has(id))
    .map(([id]) => id)
    .sort((a, b) => a - b);
  yield* own;
  for (let id = 0; id <= checked.maxWorkerId; id++) {
    if (!held.has(id) && !own.includes(id)) yield id;
  }
}

/** The client URLs of a `url` option, or undefined when one is not http(s)://host:port. */
function parseHosts(url: string): string[] | undefined {
  const hosts = url.split(",").map((h) => h.trim());
  for (const host of hosts) {
    let parsed: URL;
    try {
      parsed = new URL(host);
    } catch {
      return undefined;
    }
    if (!["http:", "https:"].includes(parsed.protocol) || !parsed.hostname) return undefined;
    if (parsed.pathname !== "/" || parsed.search || parsed.hash) return undefined;
  }
  return hosts.length > 0 ? hosts : undefined;
}

function isEtcdClient(value: unknown): value is Etcd3 {
  const client = value as Partial<Etcd3> | undefined;
  return (
    typeof client === "object" &&
    client !== null &&
    typeof client.if === "function" &&
    typeof client.getAll === "function" &&
    typeof client.leaseClient?.leaseGrant === "function"
  );
}

/** The options other than the backend, checked, with their defaults. */
function settle(options: EtcdRegistryOptions): EtcdRegistrySettings {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  if (typeof prefix !== "string" || !/^\/[^\s]*[^/\s]$/.test(prefix)) {
    throw configError(
      COMPONENT,
      "prefix",
      prefix,
      'a key prefix starting with "/", not ending with "/", e.g. "/leaf/worker-ids"',
    );
  }
  const ttlSeconds = options.leaseTtlSeconds ?? DEFAULT_TTL_SECONDS;
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > 3600) {
    throw configError(COMPONENT, "leaseTtlSeconds", ttlSeconds, "whole seconds from 1 to 3600");
  }
  const ttlMs = ttlSeconds * 1000;
  const fenceMarginMs = options.fenceMarginMs ?? Math.min(1000, ttlMs / 4);
  if (!Number.isFinite(fenceMarginMs) || fenceMarginMs < 0 || fenceMarginMs >= ttlMs / 2) {
    throw configError(
      COMPONENT,
      "fenceMarginMs",
      fenceMarginMs,
      `ms from 0 to less than half the lease TTL (${ttlMs / 2})`,
    );
  }
  const renewIntervalMs = options.renewIntervalMs ?? Math.floor(ttlMs / 3);
  const renewLimit = ttlMs - fenceMarginMs;
  if (
    !Number.isFinite(renewIntervalMs) ||
    renewIntervalMs < 10 ||
    renewIntervalMs >= renewLimit / 2
  ) {
    throw configError(
      COMPONENT,
      "renewIntervalMs",
      renewIntervalMs,
      `ms from 10 to less than half of TTL - fenceMarginMs (${renewLimit / 2}), so a failed renewal is retried before the holder fences`,
    );
  }
  const requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  if (!Number.isFinite(requestTimeoutMs) || requestTimeoutMs < 10 || requestTimeoutMs > 60_000) {
    throw configError(COMPONENT, "requestTimeoutMs", requestTimeoutMs, "ms from 10 to 60000");
  }
  return { prefix, ttlSeconds, renewIntervalMs, fenceMarginMs, requestTimeoutMs };
}

function closedError(): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.CLOSED,
    message: "the etcd registry is closed: create a new EtcdRegistry to acquire worker ids",
  });
}
