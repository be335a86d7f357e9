// The nemesis's short form, as `pnpm test` runs it: a few families, each with a fixed seed, random
// overlapping faults under load for a few dozen seconds; no id twice, ids increasing per process.
// The long form is `pnpm test:nemesis --minutes 60`.
import { fileURLToPath } from "node:url";
import { stopAll } from "@leaf/testkit";
import { afterAll, describe, expect, it } from "vitest";
import { selectFamilies } from "../src/nemesis/families";
import { runNemesis } from "../src/nemesis/nemesis";
import { SHORT_FORM } from "../src/nemesis/short-form";

afterAll(async () => {
  await stopAll();
});

describe("the nemesis, short form", () => {
  for (const { family, seed, seconds, exclude, applies } of SHORT_FORM) {
    it(`${family}, seed ${seed}: no id twice, ids increasing per process, only documented codes`, async () => {
      const result = await runNemesis({
        families: selectFamilies([family]),
        seed,
        familyMs: seconds * 1000,
        exclude,
        shrinkRuns: 0,
        resultsDir: fileURLToPath(new URL("../results", import.meta.url)),
        log: (line) => process.stderr.write(`${line}\n`),
      });
      const { run } = result.families[0]!;
      expect(run.error, "the run reached its end").toBeUndefined();
      expect(run.verdict.ids, "ids were issued").toBeGreaterThan(0);
      expect(Object.keys(run.applied).length, "faults were applied").toBeGreaterThan(0);
      expect(
        applies.filter((name) => !run.applied[name]),
        "the faults this seed was chosen for, not applied (skipped: their target was not running)",
      ).toEqual([]);
      expect(run.verdict.duplicates, "ids issued twice, per space").toEqual({});
      expect(
        run.verdict.firstOverlap,
        "ids of one worker id dated in the same stretch of time by two server processes",
      ).toBeUndefined();
      expect(run.verdict.firstDecrease, "an id not above the previous one").toBeUndefined();
      // A starved process (a stall of 1 s or more, measured in it or in the nemesis) is a fault
      // window of its own (stalls.ts): a code outside every window is undocumented.
      expect(
        run.verdict.undocumented.map((u) => `${u.code} x${u.count} to ${u.client}: ${u.message}`),
        "error codes no active fault (nor a measured stall) may cause",
      ).toEqual([]);
      expect(run.verdict.broken, "promises broken").toEqual([]);
    }, 240_000);
  }
});
