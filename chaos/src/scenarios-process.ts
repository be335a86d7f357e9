// A server process itself fails: SIGKILLed and restarted under load, on every registry.
import { freePort } from "@leaf/testkit";
import {
  allServing,
  codes,
  expectServed,
  FIXED_ID,
  isServer,
  loopsOf,
  place,
  registryNeeds,
  type Scenario,
  seconds,
  stepLasting,
} from "./scenario-kit";
import { sleep } from "./scenario-run";
import { type RegistryKind, redisOn, segmentOn, serverConfig, snowflakeOn } from "./server-configs";

export function sigkillRestart(registry: RegistryKind, short: boolean): Scenario {
  return {
    name: `sigkill-restart:${registry}`,
    kind: "process",
    title: `SIGKILL of one of two servers (segment, snowflake on the ${registry} registry, redis sequence) under load, then its restart`,
    documented:
      "The other server keeps answering; the killed one refuses connections until restarted, then serves every mode again " +
      (FIXED_ID[registry]
        ? "with the same worker id (fixed per ip:port); "
        : "with a free worker id (the dead holder's id stays taken until its lease or session ends); ") +
      "no id is repeated, segment ids keep increasing per process.",
    needs: { mysql: true, redis: true, ...registryNeeds(registry) },
    plannedSeconds: 30,
    short,
    async run(s) {
      const name = s.unique("svc");
      const perLoop = s.rate / 6;
      const db = await s.ctx.services.segmentDatabase([
        { tag: name, step: stepLasting(perLoop, 5) },
      ]);
      s.onCleanup(() => db.close());
      const redisUrl = s.ctx.services.requireRedis().url;
      const [portA, portB] = [await freePort(), await freePort()];
      const make = (label: string, port: number, localId: number) =>
        s.server(
          label,
          port,
          serverConfig(
            name,
            segmentOn(db.url),
            snowflakeOn(registry, place(s, registry, db, localId)),
            redisOn(redisUrl, name),
          ),
        );
      const a = make("A", portA, 1);
      const b = make("B", portB, 2);
      await s.startAll(a, b);
      const spaces = {
        segment: `segment:${name}`,
        snowflake: `snowflake:${name}`,
        redis: `redisSequence:${name}`,
      };
      s.segmentSpace(spaces.segment, db, name);
      s.snowflakeSpace(spaces.snowflake, [a, b]);
      s.redisSpace(spaces.redis, [1, 2]);
      s.startLoad([
        ...loopsOf(a, {
          segment: { tag: name, space: spaces.segment },
          snowflake: { space: spaces.snowflake },
          redis: { shard: 1, space: spaces.redis },
        }),
        ...loopsOf(b, {
          segment: { tag: name, space: spaces.segment },
          snowflake: { space: spaces.snowflake },
          redis: { shard: 2, space: spaces.redis },
        }),
      ]);
      await s.phase("steady", () => sleep(4000));
      const before = (await s.snowflakeState(a))?.workerId;
      await s.phase("A SIGKILLed, down 2 s", async () => {
        await a.kill();
        await sleep(2000);
      });
      const outcome = await s.phase("A restarting", () => a.tryStart());
      s.expect(outcome.started, `A started again after the SIGKILL (in ${seconds(outcome.ms)})`);
      const back = await s.phase("A serving again", async () => {
        const waits = await Promise.all(
          (["segment", "snowflake", "redisSequence"] as const).map((mode) =>
            allServing(s, [a], 30_000, mode),
          ),
        );
        return waits.every((w) => w !== undefined) ? Math.max(...(waits as number[])) : undefined;
      });
      s.expect(
        back !== undefined,
        "A serves segment, snowflake and redis-sequence ids again after the restart",
      );
      await s.poll();
      const after = (await s.snowflakeState(a))?.workerId;
      if (FIXED_ID[registry]) {
        s.expect(
          after === before && after !== undefined,
          `A has the same worker id after the restart (${before} -> ${after})`,
        );
      } else {
        s.note(`A held worker id ${before} before the SIGKILL and ${after} after the restart`);
      }
      const down = s.phaseTotals("A SIGKILLed, down 2 s", isServer(a));
      s.expect(
        Object.keys(down.errors).length > 0 &&
          Object.keys(down.errors).every((c) => /^E[A-Z]+$/.test(c) && c !== "ETIMEDOUT"),
        `A's clients were refused at the connection while it was down (${codes(down.errors)})`,
      );
      for (const phase of ["A SIGKILLed, down 2 s", "A restarting"]) {
        expectServed(s, phase, isServer(b), "B");
      }
      await s.phase("steady after the restart", () => sleep(3000));
      return `A ready ${seconds(outcome.ms)} after the restart began, all modes serving ${seconds(back)} later; worker id ${before} -> ${after}; B unaffected`;
    },
  };
}
