// The published registry conformance suite, unchanged, against a real ZooKeeper in both modes.
import { registryConformance } from "@leaf/conformance/registry";
import { startZookeeper, type ZookeeperHandle } from "@leaf/testkit";
import { afterAll, beforeAll, test } from "vitest";
import { ZookeeperRegistry } from "../src/index";
import { Admin, testOptions } from "./helpers";

let zk: ZookeeperHandle;
let admin: Admin;

beforeAll(async () => {
  zk = await startZookeeper({ tickTime: 500 });
  admin = await Admin.connect(zk.connectString);
});

afterAll(async () => {
  admin?.close();
  await zk?.dispose();
});

registryConformance(test, {
  name: "registry-zk (normal mode)",
  create: async () => new ZookeeperRegistry(testOptions(zk.connectString)),
  backups: true,
  leaseLoss: {
    // Revocation: an operator deletes the node's live marker, which a second process could take.
    induce: (_lease, { namespace }) =>
      admin.remove(`/snowflake/${namespace}/temporary/10.0.0.1:8080`),
  },
});

registryConformance(test, {
  name: "registry-zk (recycle mode)",
  create: async () => new ZookeeperRegistry(testOptions(zk.connectString, { mode: "recycle" })),
  backups: true,
  requestedWorkerId: true,
  leaseLoss: {
    // Revocation: an operator deletes the lease node; session expiry is in recycle.test.ts.
    induce: (lease, { namespace }) =>
      admin.remove(`/snowflake/${namespace}/recycle/leases/${lease.workerId}`),
  },
});
