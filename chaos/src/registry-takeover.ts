// What the registry scenarios with a remote store (Redis, etcd) share: two servers that can only
// share one worker id (workerBits 0), the holder's link to the store cut through a TCP proxy until
// the other takes the id, then healed; and the check that ids resume on one of the two. Each
// scenario adds its own store fault (Redis restarted empty, etcd stopped past the TTL).
import { freePort, type TcpProxy } from "@leaf/testkit";
import type { LeafProcess } from "./leaf-process";
import {
  countCode,
  expectServed,
  isServer,
  lastWords,
  loopsOf,
  onlyCode,
  seconds,
} from "./scenario-kit";
import { type ScenarioRun, sleep } from "./scenario-run";
import { expectFencedFirst, ONE_ID, startWhenFree } from "./scenarios-fencing";
import { segmentOff, serverConfig } from "./server-configs";

/** Snowflake mode on `registry` with its keys, one worker id. */
export function snowflakeOn(registry: string, keys: Record<string, unknown>) {
  return {
    snowflake: { enabled: true, ip: "127.0.0.1", backups: 0, workerBits: 0, registry, ...keys },
  };
}

/** The store and how the two servers reach it. */
export interface TakeoverOptions {
  /** The store's name in phase titles and messages ("Redis", "etcd"). */
  store: string;
  /** The server's `snowflake.registry`. */
  registry: string;
  /** The registry's keys for a store at `url` (`{ redis: { url, leaseMs } }`). */
  keys(url: string): Record<string, unknown>;
  /** A proxy to the store: A reaches it through this, so that A alone can be cut off. */
  proxy: TcpProxy;
  proxiedUrl: string;
  directUrl: string;
  /** Name prefix of the service. */
  label: string;
}

/**
 * A holds the only worker id; B's start is refused; A is cut off from the store until B takes the
 * id (A must fence first and answer LEASE_LOST only); the link heals and A stays fenced.
 */
export async function cutHolderUntilTakeover(s: ScenarioRun, o: TakeoverOptions) {
  const name = s.unique(o.label);
  const a = s.server(
    "A",
    await freePort(),
    serverConfig(name, segmentOff(), snowflakeOn(o.registry, o.keys(o.proxiedUrl))),
  );
  const b = s.server(
    "B",
    await freePort(),
    serverConfig(name, segmentOff(), snowflakeOn(o.registry, o.keys(o.directUrl))),
  );
  await s.startAll(a);
  const space = `snowflake:${name}`;
  s.snowflakeSpace(space, [a, b], ONE_ID);
  s.startLoad(loopsOf(a, { snowflake: { space } }));
  await s.phase("steady (A holds worker id 0)", () => sleep(3000));
  const early = await s.phase("B starting while A holds the id", () => b.tryStart());
  s.expect(
    !early.started &&
      early.code === 1 &&
      /WORKER_IDS_EXHAUSTED|no free worker id/.test(early.output),
    `B's start was refused while A held the only worker id (${early.started ? "it STARTED" : `exit code ${early.code}: "${lastWords(early.output)}"`})`,
  );

  const cut = `A cut off from ${o.store} until B holds the id`;
  const cutAt = s.now();
  const takeover = await s.phase(cut, async () => {
    o.proxy.cutOff();
    const started = await startWhenFree(b, 60_000);
    if (started.outcome.started) {
      s.addLoad(loopsOf(b, { snowflake: { space } }));
      await s.waitForIds(b, 20_000, "snowflake", 1000);
    }
    return { ...started, atMs: s.now() - cutAt };
  });
  s.expect(
    takeover.outcome.started,
    `B started once A's lease ended (${seconds(takeover.atMs)} into the cut, after ${takeover.refused} refused start(s): ${takeover.firstRefusal ?? "none"})`,
  );
  const cutTotals = s.phaseTotals(cut, isServer(a));
  s.expect(
    countCode(cutTotals.errors, "LEASE_LOST") > 0 && onlyCode(cutTotals.errors, "LEASE_LOST"),
    `A fenced while cut off: LEASE_LOST (-4) and nothing else (${cutTotals.ids} ids before the fence; ${
      Object.entries(cutTotals.errors)
        .map(([c, n]) => `${c} x${n}`)
        .join(", ") || "no error"
    })`,
  );

  const healed = "A's link healed, B serving";
  await s.phase(healed, async () => {
    o.proxy.heal();
    await sleep(3000);
  });
  const healedTotals = s.phaseTotals(healed, isServer(a));
  s.expect(
    healedTotals.ids === 0 && onlyCode(healedTotals.errors, "LEASE_LOST"),
    `A issued no id while B held the id after the heal, only LEASE_LOST (${healedTotals.ids} ids; ${Object.keys(healedTotals.errors).join(", ") || "no error"})`,
  );
  expectServed(s, healed, isServer(b), "B");
  expectFencedFirst(s, a, b);
  return { a, b, takeover };
}

/** Waits for ids from either server after a store fault; expects some. Returns which served. */
export async function resumedOnEither(
  s: ScenarioRun,
  a: LeafProcess,
  b: LeafProcess,
  after: string,
): Promise<"A" | "B" | undefined> {
  const serving = await s.phase("steady after", async () => {
    const which = await Promise.race([
      s.waitForIds(a, 20_000, "snowflake", 200).then((ms) => (ms === undefined ? undefined : "A")),
      s.waitForIds(b, 20_000, "snowflake", 200).then((ms) => (ms === undefined ? undefined : "B")),
    ]);
    await sleep(2000);
    return which;
  });
  s.expect(serving !== undefined, `ids resumed after ${after} (from ${serving ?? "no server"})`);
  return serving as "A" | "B" | undefined;
}
