// The wall clock of a snowflake server moves (libfaketime): back by 3 ms, 2 s, 1 h while it
// serves; and a restart behind the stored timestamp, by 1 h and by less than one report period.

import { layouts } from "@leaf/core";
import { freePort } from "@leaf/testkit";
import {
  codes,
  countCode,
  expectRefused,
  expectServed,
  isServer,
  loopsOf,
  loopsOfServer,
  refusalOf,
  type Scenario,
  seconds,
  until,
} from "./scenario-kit";
import { sleep } from "./scenario-run";
import { segmentOff, serverConfig, snowflakeOn } from "./server-configs";

type ClockStep = "3ms" | "2s" | "1h" | "restart-behind";

export function clockBack(steps: ClockStep[], short: boolean): Scenario {
  return {
    name: "clock-back",
    kind: "clock",
    title:
      `The wall clock of one of two snowflake servers (zk registry) moved back (${steps.filter((x) => x !== "restart-behind").join(", ")}), ` +
      "then the server SIGKILLed and restarted with its clock 1 h behind its last reported timestamp",
    documented:
      "Back by at most clockToleranceMs (5 ms): waited out, no error. Further back: ids refused with CLOCK_MOVED_BACKWARDS " +
      "(503, Leaf code -3) until the clock passes the last issued timestamp (2 s: by itself; 1 h: until the clock is fixed); " +
      "a restart with the clock behind the stored timestamp is refused (CLOCK_BEHIND_LEASE, exit code 1); the other server is unaffected; no id repeated.",
    needs: { zookeeper: true, faketime: true },
    plannedSeconds:
      10 +
      (steps.includes("3ms") ? 3 : 0) +
      (steps.includes("2s") ? 6 : 0) +
      (steps.includes("1h") ? 7 : 0) +
      25,
    short,
    async run(s) {
      const zookeeper = s.ctx.services.requireZookeeper();
      const name = s.unique("sf");
      const clock = s.fakeClock();
      const config = serverConfig(
        name,
        segmentOff(),
        snowflakeOn("zk", { zookeeper: zookeeper.url }),
      );
      const a = s.server("A", await freePort(), config, clock);
      const b = s.server("B", await freePort(), config);
      await s.startAll(a, b);
      const space = `snowflake:${name}`;
      s.snowflakeSpace(space, [a, b]);
      s.startLoad([
        ...loopsOf(a, { snowflake: { space } }),
        ...loopsOf(b, { snowflake: { space } }),
      ]);
      await s.phase("steady", () => sleep(4500));
      const workerBefore = (await s.snowflakeState(a))?.workerId;
      const summary: string[] = [];
      const onlyA = isServer(a);
      const checkB = (phase: string) => expectServed(s, phase, isServer(b), "B (real clock)");

      if (steps.includes("3ms")) {
        const waitedBefore =
          (await s.metric(a, "leaf_snowflake_clock_rollbacks_total", 'action="waited"')) ?? 0;
        const burst = await s.phase("A's clock back 3 ms, ten times", () =>
          s.burst(a, space, async () => {
            // Ten steps back of 3 ms each (offset -3, -6, ... -30 ms), 300 ms apart, while ids
            // are asked for back to back: each step lands within 3 ms of an issued id.
            for (let step = 1; step <= 10; step++) {
              await sleep(300);
              clock.set(-3 * step);
            }
            await sleep(300);
          }),
        );
        const t = s.phaseTotals("A's clock back 3 ms, ten times", onlyA);
        const errors = { ...t.errors };
        for (const [code, n] of Object.entries(burst.errors))
          errors[code] = (errors[code] ?? 0) + n;
        const waited =
          ((await s.metric(a, "leaf_snowflake_clock_rollbacks_total", 'action="waited"')) ?? 0) -
          waitedBefore;
        s.expect(
          Object.keys(errors).length === 0 && t.ids + burst.ids > 0,
          `3 ms back is waited out: A answered every request (${t.ids + burst.ids} ids, errors: ${codes(errors)})`,
        );
        s.expect(
          waited > 0,
          `A saw the clock go back and waited it out (${waited} of 10 steps seen; the rest fell between ids)`,
        );
        clock.set(0);
        checkB("A's clock back 3 ms, ten times");
        summary.push(`3 ms (x10): no error, ${waited} waited out`);
      }

      if (steps.includes("2s")) {
        await s.phase("A's clock back 2 s", async () => {
          clock.set(-2000);
          // The process sees the offset within 1 s; then 2 s of refusal.
          await sleep(3800);
        });
        await s.phase("A still 2 s behind", () => sleep(2500));
        const n = expectRefused(s, "A's clock back 2 s", onlyA, "CLOCK_MOVED_BACKWARDS", "A");
        // Once its clock passed the last issued timestamp A issues again, clock still 2 s behind.
        expectServed(s, "A still 2 s behind", onlyA, "A");
        checkB("A's clock back 2 s");
        summary.push(`2 s: -3 x${n}, then ids again`);
      }

      if (steps.includes("1h")) {
        await s.phase("A's clock back 1 h: taking effect", async () => {
          clock.set(-3_600_000);
          await sleep(1500);
        });
        await s.phase("A's clock back 1 h", () => sleep(3000));
        const held = s.phaseTotals("A's clock back 1 h", onlyA);
        const n = countCode(held.errors, "CLOCK_MOVED_BACKWARDS");
        s.expect(
          held.ids === 0 && n > 0,
          `1 h back: A issued no id and refused with CLOCK_MOVED_BACKWARDS (-3) x${n} (${codes(held.errors)})`,
        );
        const back = await s.phase("A's clock fixed", async () => {
          clock.set(0);
          return s.waitForIds(a, 10_000);
        });
        s.expect(
          back !== undefined,
          `1 h back: A issues ids again once its clock is fixed (after ${seconds(back)})`,
        );
        checkB("A's clock back 1 h");
        summary.push(`1 h: refused until fixed (-3 x${n})`);
      }

      if (steps.includes("restart-behind")) {
        const withPeer = await s.phase("A SIGKILLed, restarted 1 h behind (B live)", async () => {
          await a.kill();
          clock.set(-3_600_000);
          return a.tryStart();
        });
        const first = refusalOf(withPeer);
        s.expect(
          first.refused && first.check === "peer clocks",
          `with a live peer, A refused to start 1 h behind (peer clock check, CLOCK_SKEW): ${first.text}`,
        );
        checkB("A SIGKILLed, restarted 1 h behind (B live)");
        await s.phase("B stopped (SIGTERM): no live peer left", () => b.stop());
        const alone = await s.phase("A restarted 1 h behind (no peer)", () => a.tryStart());
        const second = refusalOf(alone);
        s.expect(
          second.refused && second.check === "stored timestamp",
          `alone, A refused to start 1 h behind its last reported timestamp (CLOCK_BEHIND_LEASE): ${second.text}`,
        );
        const restarted = await s.phase("A and B restarted with the right clock", async () => {
          clock.set(0);
          const outcomes = [await a.tryStart(), await b.tryStart()];
          const waits = await Promise.all([s.waitForIds(a, 20_000), s.waitForIds(b, 20_000)]);
          return { outcomes, serving: waits.every((w) => w !== undefined) };
        });
        await s.poll();
        const workerAfter = (await s.snowflakeState(a))?.workerId;
        const failedStarts = restarted.outcomes
          .map((o, i) => (o.started ? "" : `${i === 0 ? "A" : "B"}: ${refusalOf(o).text}`))
          .filter(Boolean);
        s.expect(
          failedStarts.length === 0 && restarted.serving && workerAfter === workerBefore,
          `with the clock fixed A (then B) start again and issue ids, A with the same worker id (${workerBefore} -> ${workerAfter})${failedStarts.length ? `; ${failedStarts.join("; ")}` : ""}`,
        );
        summary.push(
          `restart 1 h behind: refused by the ${first.check ?? "?"} check, then (alone) by the ${second.check ?? "?"} check`,
        );
      }
      await s.phase("steady after", () => sleep(2000));
      return summary.join("; ");
    },
  };
}

export const clockBackup: Scenario = {
  name: "clock-back-backup",
  kind: "clock",
  title:
    "The wall clock of a snowflake server holding one backup worker id (zk registry) moved back 2 s",
  documented:
    "With backup worker ids (snowflake.backups), a rollback past the tolerance switches to a backup id whose last timestamp " +
    "is behind the clock, so no request fails (ids under the backup id are older, so not above the last id); no id repeated.",
  needs: { zookeeper: true, faketime: true },
  plannedSeconds: 16,
  short: false,
  async run(s) {
    const zookeeper = s.ctx.services.requireZookeeper();
    const name = s.unique("sf");
    const clock = s.fakeClock();
    const a = s.server(
      "A",
      await freePort(),
      serverConfig(
        name,
        segmentOff(),
        snowflakeOn("zk", { zookeeper: zookeeper.url }, { backups: 1 }),
      ),
      clock,
    );
    await s.startAll(a);
    const space = `snowflake:${name}`;
    s.snowflakeSpace(space, [a]);
    s.startLoad(loopsOf(a, { snowflake: { space, increasing: false } }));
    await s.phase("steady", () => sleep(3000));
    const state = await s.snowflakeState(a);
    const before =
      (await s.metric(a, "leaf_snowflake_clock_rollbacks_total", 'action="backup"')) ?? 0;
    await s.phase("A's clock back 2 s", async () => {
      clock.set(-2000);
      await sleep(4000);
    });
    expectServed(s, "A's clock back 2 s", () => true, "A");
    const switched =
      ((await s.metric(a, "leaf_snowflake_clock_rollbacks_total", 'action="backup"')) ?? 0) -
      before;
    s.expect(
      switched > 0,
      `A moved to its backup worker id (clock rollbacks handled by a backup: ${switched})`,
    );
    const after = await s.snowflakeState(a);
    s.note(
      `worker id ${state?.workerId}, backup ${state?.backups?.map((x) => x.workerId).join(", ")}; active after the rollback: ${after?.activeWorkerId}`,
    );
    await s.phase("steady after", () => sleep(2000));
    return `no failed request; ids moved to backup worker id ${after?.activeWorkerId}`;
  },
};

export function clockRestartBehind(registry: "local" | "mysql"): Scenario {
  return {
    name: `clock-restart-behind:${registry}`,
    kind: "clock",
    title: `A snowflake server on the ${registry} registry SIGKILLed and restarted with its clock 1 h behind its last reported timestamp`,
    documented:
      "Start-up is refused with CLOCK_BEHIND_LEASE (both times in the message, exit code 1); with the clock fixed the same node starts " +
      "with the same worker id; no id repeated.",
    needs: { faketime: true, ...(registry === "mysql" ? { mysql: true } : {}) },
    plannedSeconds: 14,
    short: false,
    async run(s) {
      const name = s.unique("sf");
      const clock = s.fakeClock();
      let mysqlUrl: string | undefined;
      if (registry === "mysql") {
        const db = await s.ctx.services.segmentDatabase([]);
        s.onCleanup(() => db.close());
        mysqlUrl = db.url;
      }
      const a = s.server(
        "A",
        await freePort(),
        serverConfig(name, segmentOff(), snowflakeOn(registry, { mysqlUrl, localWorkerId: 5 })),
        clock,
      );
      await s.startAll(a);
      const space = `snowflake:${name}`;
      s.snowflakeSpace(space, [a]);
      s.startLoad(loopsOf(a, { snowflake: { space } }));
      // Reports go out 1 s after start, then every 3 s.
      await s.phase("steady", () => sleep(4500));
      const before = (await s.snowflakeState(a))?.workerId;
      const refused = await s.phase(
        "A SIGKILLed and restarted with its clock 1 h behind",
        async () => {
          await a.kill();
          clock.set(-3_600_000);
          return a.tryStart();
        },
      );
      const refusal = refusalOf(refused);
      s.expect(
        refusal.refused && refusal.check === "stored timestamp",
        `A refused to start 1 h behind its last reported timestamp (CLOCK_BEHIND_LEASE): ${refusal.text}`,
      );
      const back = await s.phase("A restarted with the right clock", async () => {
        clock.set(0);
        const outcome = await a.tryStart();
        return outcome.started ? s.waitForIds(a, 20_000) : undefined;
      });
      const after = (await s.snowflakeState(a))?.workerId;
      s.expect(
        back !== undefined && after === before,
        `with the clock fixed A starts and issues ids, same worker id (${before} -> ${after})`,
      );
      await s.phase("steady after", () => sleep(2000));
      return refused.started
        ? "STARTED with the clock behind"
        : `refused (exit ${refused.code}, ${refusal.check} check); restarted with worker ${after}`;
    },
  };
}

/** The registries' report period and the restart margin (core's snowflake worker defaults). */
const REPORT_INTERVAL_MS = 3000;
const RESTART_MARGIN_MS = 1000;

export function clockRestartBehindReport(registry: "local" | "mysql" | "zk"): Scenario {
  return {
    name: `clock-restart-behind-report:${registry}`,
    kind: "clock",
    title: `Two faults at once on a snowflake server (${registry === "zk" ? "zk registry, normal mode" : `${registry} registry`}): SIGKILL 2.5 s after a timestamp report, its clock stepped back 2 s (libfaketime), immediate restart`,
    documented:
      "The stored timestamp is the last report, up to one report period (3 s) old, and the clock now reads before some " +
      "ids issued since: the restarted server takes the same worker id and issues only after the stored timestamp + the " +
      "report period + the restart margin (1 s), waiting that out at start, then serves; its first id is above every id " +
      "it issued before the kill; no id repeated.",
    needs: {
      faketime: true,
      ...(registry === "mysql" ? { mysql: true } : {}),
      ...(registry === "zk" ? { zookeeper: true } : {}),
    },
    plannedSeconds: 20,
    short: false,
    async run(s) {
      const name = s.unique("sf");
      const clock = s.fakeClock();
      let mysqlUrl: string | undefined;
      if (registry === "mysql") {
        const db = await s.ctx.services.segmentDatabase([]);
        s.onCleanup(() => db.close());
        mysqlUrl = db.url;
      }
      const zookeeper = registry === "zk" ? s.ctx.services.requireZookeeper().url : undefined;
      const a = s.server(
        "A",
        await freePort(),
        serverConfig(
          name,
          segmentOff(),
          snowflakeOn(registry, { mysqlUrl, zookeeper, localWorkerId: 5 }),
        ),
        clock,
      );
      await s.startAll(a);
      const space = `snowflake:${name}`;
      s.snowflakeSpace(space, [a]);
      s.startLoad(loopsOf(a, { snowflake: { space } }));
      const reported = () =>
        s.metric(a, "leaf_snowflake_lease_events_total", 'type="reported"').then((n) => n ?? 0);
      const reportedAt = await s.phase("steady until a timestamp report", async () => {
        await sleep(1500);
        const before = await reported();
        let at: number | undefined;
        await until(async () => {
          if ((await reported()) > before) at = Date.now();
          return at !== undefined;
        }, 3 * REPORT_INTERVAL_MS);
        return at;
      });
      s.expect(
        reportedAt !== undefined,
        'A reported its timestamp (leaf_snowflake_lease_events_total{type="reported"} went up)',
      );
      const reportWall = reportedAt ?? Date.now();
      const before = await s.snowflakeState(a);
      const restart = await s.phase(
        "A SIGKILLed 2.5 s after the report, restarted at once with its clock 2 s back",
        async () => {
          await sleep(Math.max(0, reportWall + 2500 - Date.now()));
          await a.kill();
          const highestBefore = s.load.idRange(loopsOfServer(a), 1).highest;
          clock.set(-2000);
          const outcome = await a.tryStart();
          const firstId = outcome.started ? await s.waitForIds(a, 30_000) : undefined;
          return { outcome, highestBefore, firstId };
        },
      );
      s.expect(
        restart.outcome.started,
        `A started again with its clock 2 s behind (${restart.outcome.started ? `ready in ${seconds(restart.outcome.ms)}` : refusalOf(restart.outcome).text})`,
      );
      await s.poll();
      const after = await s.snowflakeState(a);
      s.expect(
        after?.workerId !== undefined && after.workerId === before?.workerId,
        `A has the same worker id after the restart (${before?.workerId} -> ${after?.workerId})`,
      );
      const lowestAfter = s.load.idRange(loopsOfServer(a), 2).lowest;
      const firstTick =
        lowestAfter === undefined ? undefined : layouts.leaf.decompose(lowestAfter).timestampMs;
      s.expect(
        lowestAfter !== undefined &&
          restart.highestBefore !== undefined &&
          lowestAfter > restart.highestBefore,
        `the restarted A's first id is above every id it issued before the kill (${restart.highestBefore} then ${lowestAfter})`,
      );
      // The stored timestamp is at most the instant the report was seen (polled every 100 ms).
      const floor = reportWall - 500 + REPORT_INTERVAL_MS + RESTART_MARGIN_MS;
      s.expect(
        firstTick !== undefined && firstTick >= floor,
        `its first id is dated after the report + the report period + the margin (${firstTick === undefined ? "no id" : `${firstTick - reportWall} ms after the report seen`}; at least ${REPORT_INTERVAL_MS + RESTART_MARGIN_MS - 500} ms expected)`,
      );
      await s.phase("steady after", () => sleep(2000));
      expectServed(s, "steady after", isServer(a), "A");
      return `restarted ${restart.outcome.started ? "" : "NOT "}with the clock 2 s back; first id ${seconds(restart.firstId)} after ready, dated ${firstTick === undefined ? "?" : `${firstTick - reportWall} ms`} after the report`;
    },
  };
}
