// The Redis worker-id registry under faults: two servers sharing one worker id (workerBits 0), the
// holder's link to Redis cut (a TCP proxy) while the other takes the id, then Redis restarted empty
// (no persistence) under the new holder. Both servers' ids share one space, so any id issued twice
// is counted.

import { TcpProxy } from "@leaf/testkit";
import { cutHolderUntilTakeover, resumedOnEither } from "./registry-takeover";
import { countCode, isServer, type Scenario, seconds, until } from "./scenario-kit";
import { sleep } from "./scenario-run";

/**
 * The lease (the holder fences at 4/5 of it, and no id is granted for this long after a data loss).
 */
const LEASE_MS = 3000;

export const redisRegistry: Scenario = {
  name: "redis-registry",
  kind: "Redis",
  title:
    "Two snowflake servers sharing one worker id on the redis registry (workerBits 0, 3 s lease): the holder's link to Redis cut (TCP proxy) until the other holds the id, then healed; then Redis SIGKILLed and restarted empty (no persistence)",
  documented:
    "The other server's start is refused while the id is held (WORKER_IDS_EXHAUSTED). The cut-off holder fences at leaseMs - margin after its last confirmed renewal, " +
    "before Redis lets the other take the id: it answers LEASE_LOST (-4) only, and every id it issued is below every id of the other. " +
    "After Redis restarts empty, the holder finds its token gone and fences (LEASE_LOST); no id is granted until one lease after the restart, " +
    "and the next holder starts after that floor; ids resume; no id repeated.",
  needs: { redis: true },
  plannedSeconds: 40,
  short: false,
  async run(s) {
    const redis = s.ctx.services.requireRedis();
    const proxy = await TcpProxy.start({ targetPort: redis.port });
    s.onCleanup(() => proxy.close());
    const { a, b, takeover } = await cutHolderUntilTakeover(s, {
      store: "Redis",
      registry: "redis",
      keys: (url) => ({ redis: { url, leaseMs: LEASE_MS } }),
      proxy,
      proxiedUrl: `redis://127.0.0.1:${proxy.port}`,
      directUrl: redis.url,
      label: "redisreg",
    });

    const restart = "Redis SIGKILLed and restarted empty";
    const back = await s.phase(restart, async () => {
      await redis.kill();
      await redis.start();
      // B finds its token gone at its next renewal and fences; then, one lease after the restart,
      // one of the two takes the id again.
      const fenced = await until(
        async () => (await s.snowflakeState(b))?.state === "fenced",
        15_000,
      );
      s.expect(
        fenced !== undefined,
        `B's monitor showed it fenced after Redis came back without its token (${seconds(fenced)} after Redis answered)`,
      );
      return until(async () => {
        const states = await Promise.all([s.snowflakeState(a), s.snowflakeState(b)]);
        return states.some((st) => st?.state === "held");
      }, 30_000);
    });
    const restartTotals = s.phaseTotals(restart, isServer(b));
    s.expect(
      countCode(restartTotals.errors, "LEASE_LOST") > 0,
      `B, the holder, fenced after Redis came back without its token (LEASE_LOST x${countCode(restartTotals.errors, "LEASE_LOST")})`,
    );
    s.expect(
      back !== undefined,
      `a server holds the id again after the restart (${seconds(back)} after Redis answered)`,
    );
    const serving = await resumedOnEither(s, a, b, "the restart");
    // One server holds the id; stopped, it hands the id to the other, which then serves.
    const holder = serving === "A" ? a : b;
    const other = serving === "A" ? b : a;
    const handedOver = `${holder.label} stopped (SIGTERM): ${other.label} takes the id`;
    const handedBack = await s.phase(handedOver, async () => {
      await holder.stop();
      const ms = await s.waitForIds(other, 30_000, "snowflake", 200);
      await sleep(2000);
      return ms;
    });
    s.expect(
      handedBack !== undefined,
      `${other.label} took the worker id once ${holder.label} released it, and issues ids (${seconds(handedBack)})`,
    );
    return `B held the id ${seconds(takeover.atMs)} into A's cut; A answered LEASE_LOST only; after Redis restarted empty ${serving ?? "no server"} issued again ${seconds(back)} after it answered; ${other.label} took the id ${seconds(handedBack)} after ${holder.label} stopped`;
  },
};
