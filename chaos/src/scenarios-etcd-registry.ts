// The etcd worker-id registry under faults: two servers sharing one worker id (workerBits 0), the
// holder's link to etcd cut (a TCP proxy) while the other takes the id, then etcd itself stopped
// (SIGSTOP) past the lease TTL under the new holder. The scenario runs its own etcd member (the
// run's services have none). Both servers' ids share one space, so any id issued twice is counted.

import { startEtcd, TcpProxy } from "@leaf/testkit";
import { cutHolderUntilTakeover, resumedOnEither } from "./registry-takeover";
import { countCode, isServer, onlyCode, type Scenario, seconds, until } from "./scenario-kit";
import { sleep } from "./scenario-run";

/** The etcd lease TTL (the holder fences min(1 s, TTL / 4) before it could expire). */
const TTL_SECONDS = 3;

export const etcdRegistry: Scenario = {
  name: "etcd-registry",
  kind: "network",
  title:
    "Two snowflake servers sharing one worker id on the etcd registry (workerBits 0, 3 s lease TTL): the holder's link to etcd cut (TCP proxy) until the other holds the id, then healed; then etcd SIGSTOPped past the TTL and resumed",
  documented:
    "The other server's start is refused while the id is held (WORKER_IDS_EXHAUSTED). The cut-off holder fences at the send time of its last renewal etcd confirmed + TTL - margin, " +
    "before etcd can expire its lease and let the other take the id: it answers LEASE_LOST (-4) only, and every id it issued is below every id of the other. " +
    "While etcd is stopped past the TTL the holder fences (LEASE_LOST) before etcd runs again; once etcd answers, a server takes the id again, " +
    "starting after the stored timestamp and horizon; ids resume; no id repeated.",
  needs: {},
  plannedSeconds: 40,
  short: false,
  async run(s) {
    const etcd = await startEtcd({ useEnv: false });
    s.onCleanup(() => etcd.dispose());
    const proxy = await TcpProxy.start({ targetPort: etcd.port });
    s.onCleanup(() => proxy.close());
    const { a, b, takeover } = await cutHolderUntilTakeover(s, {
      store: "etcd",
      registry: "etcd",
      keys: (url) => ({ etcd: { url, leaseTtlSeconds: TTL_SECONDS } }),
      proxy,
      proxiedUrl: `http://127.0.0.1:${proxy.port}`,
      directUrl: etcd.url,
      label: "etcdreg",
    });

    const stopped = "etcd SIGSTOPped past the TTL";
    const fencedWhileStopped = await s.phase(stopped, async () => {
      etcd.pause();
      try {
        // B, the holder, must fence while etcd is still stopped; then stay stopped past the TTL.
        const fenced = await until(
          async () => (await s.snowflakeState(b))?.state !== "held",
          TTL_SECONDS * 10_000,
        );
        await sleep(TTL_SECONDS * 1000 + 1000);
        return fenced;
      } finally {
        etcd.resume();
      }
    });
    s.expect(
      fencedWhileStopped !== undefined,
      `B, the holder, fenced while etcd was stopped (${seconds(fencedWhileStopped)} after SIGSTOP)`,
    );
    const stoppedTotals = s.phaseTotals(stopped, isServer(b));
    s.expect(
      countCode(stoppedTotals.errors, "LEASE_LOST") > 0 &&
        onlyCode(stoppedTotals.errors, "LEASE_LOST"),
      `B answered LEASE_LOST (-4) and nothing else once fenced (LEASE_LOST x${countCode(stoppedTotals.errors, "LEASE_LOST")}; ${
        Object.keys(stoppedTotals.errors).join(", ") || "no error"
      })`,
    );
    const resumedAt = s.now();
    const back = await s.phase("etcd resumed", () =>
      until(async () => {
        const states = await Promise.all([s.snowflakeState(a), s.snowflakeState(b)]);
        return states.some((st) => st?.state === "held");
      }, 30_000),
    );
    s.expect(
      back !== undefined,
      `a server holds the id again after etcd resumed (${seconds(back)} after SIGCONT)`,
    );
    const serving = await resumedOnEither(s, a, b, "etcd resumed");
    return `B held the id ${seconds(takeover.atMs)} into A's cut; A answered LEASE_LOST only; B fenced ${seconds(fencedWhileStopped)} after etcd's SIGSTOP; ${serving ?? "no server"} issued again ${seconds(back)} after SIGCONT (${seconds(s.now() - resumedAt)} phase)`;
  },
};
