// The etcd calls of the registry, each with a deadline (a stalled or cut-off etcd must fail a call,
// not hang it) and each failure turned into one UNAVAILABLE LeafError that names etcd's address.
import { ErrorCodes, isLeafError, LeafError } from "@leaf/core";
import type { Etcd3, IKeyValue } from "etcd3";

/** gRPC call options (the deadline), as etcd3's builders take them. */
type CallOptions = { deadline: number };

import { COMPONENT } from "./etcd-keys";

/** An etcd lease as granted: its id and the TTL the server chose (it may raise a short one). */
export interface GrantedLease {
  id: string;
  ttlMs: number;
}

/** The registry's view of one etcd client: deadlines and errors applied. */
export class EtcdCalls {
  constructor(
    readonly client: Etcd3,
    /** Deadline of each call, ms. */
    readonly timeoutMs: number,
    /** Where etcd is, for messages ("http://10.0.0.5:2379" or "the given client"). */
    readonly where: string,
  ) {}

  /** Call options with this call's deadline. */
  options(): CallOptions {
    return { deadline: Date.now() + this.timeoutMs };
  }

  /** Runs one etcd call; a failure that is not already a LeafError becomes UNAVAILABLE. */
  async run<T>(what: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw this.unavailable(what, error);
    }
  }

  /** The UNAVAILABLE error for a failed call (a LeafError is returned as it is). */
  unavailable(what: string, error: unknown): LeafError {
    if (isLeafError(error)) return error;
    const reason = error instanceof Error ? error.message : String(error);
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message:
        `cannot ${what}: etcd at ${this.where} did not answer within ${this.timeoutMs} ms or failed ` +
        `(${reason}); check that etcd runs and is reachable from this node`,
      details: { where: this.where, timeoutMs: this.timeoutMs },
      cause: error,
    });
  }

  /** Grants an etcd lease of `ttlSeconds`; the answer's TTL is what etcd will apply. */
  grant(ttlSeconds: number): Promise<GrantedLease> {
    return this.run("grant an etcd lease", async () => {
      const answer = await this.client.leaseClient.leaseGrant(
        { TTL: ttlSeconds, ID: 0 },
        this.options(),
      );
      if (answer.error) throw new Error(answer.error);
      return { id: String(answer.ID), ttlMs: Number(answer.TTL) * 1000 };
    });
  }

  /**
   * One keepalive of lease `id`: resolves with the TTL in ms that etcd restarted it with (counted
   * from when etcd received it), or 0 when the lease no longer exists (expired or revoked).
   */
  keepAlive(id: string): Promise<number> {
    return this.run("renew the etcd lease", async () => {
      const stream = await this.client.leaseClient.leaseKeepAlive(this.options());
      return new Promise<number>((resolve, reject) => {
        stream.on("data", (answer) => {
          stream.end();
          resolve(Number(answer.TTL) * 1000);
        });
        // Also after the answer: an error of the closing stream must not go unhandled.
        stream.on("error", reject);
        stream.write({ ID: id });
      });
    });
  }

  /** Revokes lease `id` (etcd deletes its keys); a lease that is already gone is not an error. */
  revoke(id: string): Promise<void> {
    return this.run("revoke the etcd lease", async () => {
      try {
        await this.client.leaseClient.leaseRevoke({ ID: id }, this.options());
      } catch (error) {
        if ((error as Error)?.constructor?.name === "EtcdLeaseInvalidError") return;
        throw error;
      }
    });
  }

  /** Every key-value under `prefix`. */
  list(prefix: string): Promise<IKeyValue[]> {
    return this.run("list the worker ids in etcd", async () => {
      const answer = await this.client.getAll().prefix(prefix).options(this.options()).exec();
      return answer.kvs;
    });
  }

  /** The key-value at `key`, or undefined. */
  get(key: string): Promise<IKeyValue | undefined> {
    return this.run(`read ${key} from etcd`, async () => {
      const answer = await this.client.get(key).options(this.options()).exec();
      return answer.kvs[0];
    });
  }
}
