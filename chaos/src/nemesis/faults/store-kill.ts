// SIGKILL of a store, restarted on the same port after 1-6 s: MariaDB, ZooKeeper and etcd keep
// their data; Redis (no persistence) comes back empty, which the redis registry and the redis
// sequence must detect and fence.
import type { StoreKind } from "../cluster";
import { type Fault, storeEffect } from "./fault";

export const storeKill: Fault = {
  name: "store-kill",
  title: "SIGKILL of a store, restart after 1-6 s (Redis empty)",
  // A family whose store needs an operator after a loss restarts it by its own faults.
  targets: (family) => (family.ownStoreRestart ? [] : family.stores),
  resources: (target) => [`store:${target}`],
  durationMs: [1000, 6000],
  async start(c, _family, target) {
    const store = c.store(target as StoreKind);
    if (!store.running) return false;
    await store.kill();
    return true;
  },
  async stop(c, _family, target) {
    const store = c.store(target as StoreKind);
    if (!store.running) {
      await store.start();
      await c.storeRestarted(target as StoreKind);
    }
  },
  effects: (family, target) => ({
    effects: [storeEffect(family, ["*"], target)],
    settleMs: family.recoveryMs,
  }),
};
