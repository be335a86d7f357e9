import { MemoryRegistry, MemoryRegistryStore } from "@leaf/core";
import { test } from "vitest";
import { registryConformance } from "../src/registry";

const stores = new Map<string, MemoryRegistryStore>();
const storeFor = (namespace: string) => {
  let store = stores.get(namespace);
  if (!store) {
    store = new MemoryRegistryStore();
    stores.set(namespace, store);
  }
  return store;
};

registryConformance(test, {
  name: "core MemoryRegistry",
  create: async ({ namespace }) => new MemoryRegistry({ store: storeFor(namespace) }),
  backups: true,
  requestedWorkerId: true,
  leaseLoss: {
    induce: async (lease, { namespace }) => {
      storeFor(namespace).revoke(namespace, lease.workerId, "revoked by the conformance test");
    },
  },
});
