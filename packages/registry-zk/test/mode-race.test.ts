// A normal-mode node and a recycle-mode node (a StatefulSet pod asking for id 0) of one fresh leaf
// name start at the same instant against a real ZooKeeper. Each mode refuses a name the other uses;
// checked only before its own node exists, both checks pass and both are granted id 0. Every id
// the granted leases issue is counted.
import { ErrorCodes, isLeafError, layouts, SnowflakeGenerator, type WorkerLease } from "@leaf/core";
import { countDuplicates } from "@leaf/testkit";
import { describe, expect, it } from "vitest";
import { nodeOf, uniqueName, zkFixture } from "./helpers";

const fx = zkFixture();
const ROUNDS = 40;
const IDS_PER_LEASE = 20_000;

/** The ids the holders of `leases` issue side by side, as two live nodes do (the leaf layout). */
function issue(leases: readonly WorkerLease[]): string[][] {
  const generators = leases.map(
    (lease) =>
      new SnowflakeGenerator({
        workerId: lease.workerId,
        layout: layouts.leaf,
        lastTimestamp: lease.lastTimestamp,
      }),
  );
  const ids = leases.map((): string[] => []);
  for (let drawn = 0; drawn < IDS_PER_LEASE; drawn += 100) {
    for (const [i, generator] of generators.entries()) {
      ids[i]!.push(...generator.nextIds(100).map(String));
    }
  }
  return ids;
}

describe("normal mode and recycle mode starting together on one leaf name", () => {
  it("never both hold the name: at most one is granted, the other is refused and leaves no node behind", async () => {
    const issued: string[][] = [];
    const outcomes: string[] = [];
    let both = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const name = uniqueName("race");
      const normal = fx.registry({ mode: "normal" });
      const recycle = fx.registry({ mode: "recycle" });
      const [n, r] = await Promise.allSettled([
        normal.acquire({ node: nodeOf(name, 0), maxWorkerId: 1023 }),
        recycle.acquire({ node: nodeOf(name, 1), maxWorkerId: 1023, workerId: 0 }),
      ]);
      outcomes.push(
        `${n.status === "fulfilled" ? `N${n.value.workerId}` : "n"}/${r.status === "fulfilled" ? `R${r.value.workerId}` : "r"}`,
      );
      const granted = [n, r].flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
      issued.push(...issue(granted));
      for (const settled of [n, r]) {
        if (settled.status === "rejected") {
          expect(isLeafError(settled.reason, ErrorCodes.INVALID_CONFIG)).toBe(true);
        }
      }
      if (n.status === "fulfilled" && r.status === "fulfilled") both++;
      // A refused start removed what it created: the name stays usable by the mode that won.
      if (n.status === "rejected") {
        expect(await fx.admin.children(`/snowflake/${name}/forever`)).toEqual([]);
      }
      if (r.status === "rejected") {
        expect(await fx.admin.children(`/snowflake/${name}/recycle/workers`)).toEqual([]);
      }
      for (const settled of [n, r]) {
        if (settled.status === "fulfilled") await settled.value.release();
      }
      await normal.close();
      await recycle.close();
    }
    const count = countDuplicates(issued);
    console.log(
      `normal/recycle race: both granted in ${both} of ${ROUNDS} rounds; ${count.duplicates} of ${count.total} ids repeated; ${outcomes.join(" ")}`,
    );
    expect(both).toBe(0);
    expect(count.duplicates).toBe(0);
  }, 300_000);
});
