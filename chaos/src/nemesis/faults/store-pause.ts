// SIGSTOP of a store (MariaDB, ZooKeeper, Redis, etcd) for 1-10 s, then SIGCONT: every server using
// it waits; leases may lapse.
import type { StoreKind } from "../cluster";
import { type Fault, storeEffect } from "./fault";

export const storePause: Fault = {
  name: "store-pause",
  title: "SIGSTOP of a store, SIGCONT after 1-10 s",
  targets: (family) => family.stores,
  resources: (target) => [`store:${target}`],
  durationMs: [1000, 10_000],
  async start(c, _family, target) {
    const store = c.store(target as StoreKind);
    if (!store.running) return false;
    store.pause();
    return true;
  },
  async stop(c, _family, target) {
    const store = c.store(target as StoreKind);
    if (store.running) store.resume();
  },
  effects: (family, target) => ({
    effects: [storeEffect(family, ["*"], target)],
    settleMs: family.recoveryMs,
  }),
};
