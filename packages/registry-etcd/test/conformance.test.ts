// The registry conformance suite, unchanged, against a private etcd. Lease loss is induced the way
// etcd takes a lease away: another client revokes the holder's etcd lease.
import { registryConformance } from "@leaf/conformance/registry";
import { type EtcdHandle, startEtcd, stopAll } from "@leaf/testkit";
import { Etcd3 } from "etcd3";
import { afterAll, beforeAll, test } from "vitest";
import { EtcdRegistry } from "../src/index";

let etcd: EtcdHandle;
let admin: Etcd3;

beforeAll(async () => {
  etcd = await startEtcd();
  admin = new Etcd3({ hosts: etcd.url });
});

afterAll(async () => {
  admin?.close();
  await stopAll();
});

const PREFIX = "/conformance";

registryConformance(test, {
  name: "registry-etcd",
  // A lease of 5 s: long enough for an acquire on a busy machine (with 2 s, four acquirers at once
  // under a load of 20 took longer than the lease, and the registry rightly refused to start one);
  // lease loss is induced by revocation, so nothing waits for it to run out.
  create: async () => new EtcdRegistry({ url: etcd.url, prefix: PREFIX, leaseTtlSeconds: 5 }),
  backups: true,
  requestedWorkerId: true,
  exhaustion: { maxWorkerId: 3 },
  leaseLoss: {
    induce: async (lease, { namespace }) => {
      const holder = await admin.get(`${PREFIX}/${namespace}/holder/${lease.workerId}`).string();
      if (holder === null) throw new Error(`worker id ${lease.workerId} has no holder key`);
      await admin.leaseClient.leaseRevoke({ ID: JSON.parse(holder).lease });
    },
    waitMs: 20_000,
  },
});
