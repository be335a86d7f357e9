// EtcdRegistry beyond the conformance suite, against a private etcd: its options, the client it
// owns or borrows, close(), what it keeps in etcd, and what it does when etcd or its keys
// misbehave.
import { ErrorCodes, isLeafError, type WorkerLease } from "@leaf/core";
import { type EtcdHandle, startEtcd, stopAll } from "@leaf/testkit";
import { Etcd3 } from "etcd3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdRegistry, type EtcdRegistryOptions } from "../src/index";

let etcd: EtcdHandle;
let admin: Etcd3;
let services = 0;

beforeAll(async () => {
  etcd = await startEtcd({ useEnv: false });
  admin = new Etcd3({ hosts: etcd.url });
});

afterAll(async () => {
  admin?.close();
  await stopAll();
});

const PREFIX = "/unit";
const open: EtcdRegistry[] = [];

function registry(extra: Partial<EtcdRegistryOptions> = {}): EtcdRegistry {
  const r = new EtcdRegistry({ url: etcd.url, prefix: PREFIX, leaseTtlSeconds: 2, ...extra });
  open.push(r);
  return r;
}

function service(): string {
  return `svc${services++}`;
}

const node = (name: string, i = 1) => ({ name, ip: `10.3.0.${i}`, port: 8080 });

async function record(name: string, workerId: number) {
  const text = await admin.get(`${PREFIX}/${name}/id/${workerId}`).string();
  return text === null ? undefined : JSON.parse(text);
}

function caught(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error("expected an error");
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

async function waitFor(check: () => boolean, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

afterAll(async () => {
  for (const r of open) await r.close();
});

describe("EtcdRegistry options", () => {
  it.each([
    [{ url: "etcd:2379" }, "url", /http:\/\/host:port/],
    [{ url: "http://127.0.0.1:2379/v3" }, "url", /http:\/\/host:port/],
    [{}, "url", /or a client/],
    [{ url: "http://127.0.0.1:2379", client: {} }, "client", /either url or client/],
    [{ client: { get: () => 0 } }, "client", /etcd3 client/],
    [{ url: "http://127.0.0.1:2379", prefix: "leaf" }, "prefix", /starting with "\/"/],
    [{ url: "http://127.0.0.1:2379", leaseTtlSeconds: 0 }, "leaseTtlSeconds", /1 to 3600/],
    [{ url: "http://127.0.0.1:2379", leaseTtlSeconds: 2.5 }, "leaseTtlSeconds", /whole seconds/],
    [
      { url: "http://127.0.0.1:2379", leaseTtlSeconds: 2, fenceMarginMs: 1000 },
      "fenceMarginMs",
      /less than half the lease TTL \(1000\)/,
    ],
    [
      { url: "http://127.0.0.1:2379", leaseTtlSeconds: 10, renewIntervalMs: 5000 },
      "renewIntervalMs",
      /retried before the holder fences/,
    ],
    [{ url: "http://127.0.0.1:2379", requestTimeoutMs: 0 }, "requestTimeoutMs", /10 to 60000/],
  ])("refuses %j with INVALID_CONFIG naming %s", (options, key, expected) => {
    const error = caught(() => new EtcdRegistry(options as EtcdRegistryOptions));
    expect(isLeafError(error, ErrorCodes.INVALID_CONFIG)).toBe(true);
    expect((error as { details: { key: string } }).details.key).toBe(key);
    expect((error as Error).message).toMatch(expected);
    expect((error as Error).message).toMatch(/^\[leaf\] \[registry-etcd\] invalid /);
  });

  it("settles the lease timing from the TTL", () => {
    const r = new EtcdRegistry({ url: "http://127.0.0.1:2379", leaseTtlSeconds: 10 });
    expect(r.settings).toEqual({
      prefix: "/leaf/worker-ids",
      ttlSeconds: 10,
      renewIntervalMs: 3333,
      fenceMarginMs: 1000,
      requestTimeoutMs: 2000,
    });
  });

  it("does no I/O when built, and names etcd's address when it cannot be reached", async () => {
    const r = registry({ url: "http://127.0.0.1:1", requestTimeoutMs: 500 });
    const error = await rejection(r.acquire({ node: node(service()), maxWorkerId: 3 }));
    expect(isLeafError(error, ErrorCodes.UNAVAILABLE)).toBe(true);
    expect((error as Error).message).toMatch(
      /cannot grant an etcd lease: etcd at http:\/\/127\.0\.0\.1:1 /,
    );
  });
});

describe("EtcdRegistry", () => {
  it("uses a given client and never closes it", async () => {
    const client = new Etcd3({ hosts: etcd.url });
    try {
      const r = new EtcdRegistry({ client, prefix: PREFIX, leaseTtlSeconds: 2 });
      const name = service();
      const lease = await r.acquire({ node: node(name), maxWorkerId: 3 });
      await lease.release(Date.now());
      await r.close();
      expect(await client.get(`${PREFIX}/${name}/id/${lease.workerId}`).string()).not.toBeNull();
    } finally {
      client.close();
    }
  });

  it("aborts the leases it still holds when closed, and refuses to acquire after", async () => {
    const r = registry();
    const lease = await r.acquire({ node: node(service()), maxWorkerId: 3 });
    await r.close();
    expect(lease.lost.aborted).toBe(true);
    expect(isLeafError(lease.lost.reason, ErrorCodes.LEASE_LOST)).toBe(true);
    expect((lease.lost.reason as Error).message).toMatch(/registry was closed/);
    expect(lease.fenceAt).toBe(0);
    const error = await rejection(r.acquire({ node: node(service()), maxWorkerId: 3 }));
    expect(isLeafError(error, ErrorCodes.CLOSED)).toBe(true);
  });

  it("keeps each id's record after release: the final report, and no horizon", async () => {
    const name = service();
    const lease = await registry().acquire({ node: node(name), maxWorkerId: 3 });
    const held = await record(name, lease.workerId);
    expect(held.node).toBe("10.3.0.1:8080");
    expect(held.horizon).toBeGreaterThan(Date.now());
    const final = Date.now() - 10;
    await lease.release(final);
    expect(await record(name, lease.workerId)).toEqual({
      timestamp: final,
      horizon: 0,
      node: "10.3.0.1:8080",
    });
    expect(await admin.get(`${PREFIX}/${name}/holder/${lease.workerId}`).string()).toBeNull();
    const again = await registry().acquire({ node: node(name), maxWorkerId: 3 });
    expect(again.workerId).toBe(lease.workerId);
    expect(again.lastTimestamp).toBe(final);
  });

  it("starts the next holder after the horizon of a holder that vanished without releasing", async () => {
    const name = service();
    const first = registry();
    const lease = await first.acquire({ node: node(name), maxWorkerId: 0 });
    const reported = Date.now() - 1000;
    await lease.report(reported);
    const { horizon } = await record(name, 0);
    expect(horizon).toBeGreaterThan(reported);
    await first.close(); // no release: the etcd lease is left to expire
    let next: WorkerLease | undefined;
    while (!next) {
      next = await registry()
        .acquire({ node: node(name, 2), maxWorkerId: 0 })
        .catch((error) => {
          if (!isLeafError(error, ErrorCodes.WORKER_IDS_EXHAUSTED)) throw error;
          return new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 100));
        });
    }
    expect(next.lastTimestamp).toBe(horizon);
  });

  it("loses the lease when an operator deletes its holder key, and says so on the next report", async () => {
    const name = service();
    const lease = await registry().acquire({ node: node(name), maxWorkerId: 3, backups: 1 });
    const backup = lease.backups[0]!.workerId;
    await admin.delete().key(`${PREFIX}/${name}/holder/${backup}`);
    const error = await rejection(lease.report(Date.now()));
    expect(isLeafError(error, ErrorCodes.LEASE_LOST)).toBe(true);
    expect((error as { leafCode?: number }).leafCode).toBe(-4);
    expect((error as Error).message).toMatch(
      new RegExp(`worker id ${backup} lease lost: its holder key in etcd is gone`),
    );
    expect(lease.lost.aborted).toBe(true);
  });

  it("refuses to take an id whose record is corrupt, naming the key", async () => {
    const name = service();
    await admin.put(`${PREFIX}/${name}/id/0`).value("not json");
    const error = await rejection(registry().acquire({ node: node(name), maxWorkerId: 3 }));
    expect(isLeafError(error, ErrorCodes.CORRUPT_DATA)).toBe(true);
    expect((error as Error).message).toMatch(
      `etcd key ${PREFIX}/${name}/id/0 is not a worker-id record`,
    );
    // The failed acquire gave back everything it held.
    expect(await admin.getAll().prefix(`${PREFIX}/${name}/holder/`).keys()).toEqual([]);
  });

  it("rejects a report with UNAVAILABLE while etcd is stopped, and keeps the lease once it answers", async () => {
    const r = registry({ leaseTtlSeconds: 6, requestTimeoutMs: 300 });
    const lease = await r.acquire({ node: node(service()), maxWorkerId: 3 });
    etcd.pause();
    let error: unknown;
    try {
      error = await rejection(lease.report(Date.now()));
    } finally {
      etcd.resume();
    }
    expect(isLeafError(error, ErrorCodes.UNAVAILABLE)).toBe(true);
    await waitFor(() => !lease.lost.aborted, "the lease still held");
    await lease.report(Date.now());
    expect(lease.lost.aborted).toBe(false);
    await lease.release(Date.now());
  });
});
