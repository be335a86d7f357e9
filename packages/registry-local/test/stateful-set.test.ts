// Kubernetes without an API call: a StatefulSet pod's ordinal (from its name) plus an offset is its
// worker id, and its lock and cache files on the pod's own volume carry the last timestamp across
// restarts and rescheduling.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ErrorCodes, LeafError, layouts } from "@leaf/core";
import { afterAll, describe, expect, it } from "vitest";
import { LocalRegistry, statefulSetWorkerId } from "../src/index";

const root = mkdtempSync(join(tmpdir(), "leaf-statefulset-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let volumes = 0;
/** A pod's persistent volume (a volumeClaimTemplate gives each pod its own). */
const volume = () => join(root, `pvc-${volumes++}`);
const node = { name: "orders", ip: "10.244.1.7", port: 8080 };

function refusal(fn: () => unknown): LeafError {
  try {
    fn();
  } catch (error) {
    if (error instanceof LeafError) return error;
    throw error;
  }
  throw new Error("expected a LeafError");
}

describe("StatefulSet ordinal", () => {
  it("is the number after the last dash of the pod name, plus the offset", () => {
    expect(statefulSetWorkerId({ hostname: "leaf-0" }).workerId).toBe(0);
    expect(statefulSetWorkerId({ hostname: "leaf-web-12" })).toEqual({
      workerId: 12,
      hostname: "leaf-web-12",
      ordinal: 12,
      offset: 0,
      processes: 1,
      process: 0,
    });
    expect(statefulSetWorkerId({ hostname: "leaf-b-3", offset: 100 }).workerId).toBe(103);
    // HOSTNAME, which Kubernetes sets to the pod's name, by default.
    expect(statefulSetWorkerId(true, { HOSTNAME: "leaf-7" }).workerId).toBe(7);
  });

  it("refuses a name that is not a StatefulSet pod's, naming it, and a bad offset", () => {
    for (const hostname of [
      "leaf-7f9c8d5b-x2x9z",
      "leaf",
      "Leaf-1",
      "leaf-01",
      "-1",
      "leaf-1.ns",
    ]) {
      const error = refusal(() => statefulSetWorkerId({ hostname }));
      expect(error.code, hostname).toBe(ErrorCodes.INVALID_CONFIG);
      expect(error.details, hostname).toMatchObject({
        key: "statefulSet.hostname",
        value: hostname,
      });
      expect(error.message).toContain('"<set name>-<ordinal>"');
    }
    const unset = refusal(() => statefulSetWorkerId(true, {}));
    expect(unset.message).toContain("HOSTNAME environment variable is not set");
    for (const offset of [-1, 1.5, Number.NaN]) {
      expect(
        refusal(() => statefulSetWorkerId({ hostname: "leaf-1", offset })).details,
      ).toMatchObject({ key: "statefulSet.offset" });
    }
    expect(
      refusal(() => new LocalRegistry({ workerId: 1, statefulSet: { hostname: "leaf-1" } }))
        .message,
    ).toContain("exactly one of them");
  });

  it("gives each process of a pod running several its own id: a block of `processes` ids per ordinal", () => {
    const ids = (processes: number, offset = 0) =>
      [0, 1, 2].flatMap((ordinal) =>
        Array.from(
          { length: processes },
          (_, process) =>
            statefulSetWorkerId({ hostname: `leaf-${ordinal}`, offset, processes, process })
              .workerId,
        ),
      );
    expect(ids(2)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(ids(3, 10)).toEqual([10, 11, 12, 13, 14, 15, 16, 17, 18]);
    expect(statefulSetWorkerId({ hostname: "leaf-4", processes: 2, process: 1 })).toEqual({
      workerId: 9,
      hostname: "leaf-4",
      ordinal: 4,
      offset: 0,
      processes: 2,
      process: 1,
    });
    for (const processes of [0, -1, 1.5, Number.NaN]) {
      expect(
        refusal(() => statefulSetWorkerId({ hostname: "leaf-1", processes })).details,
      ).toMatchObject({ key: "statefulSet.processes", value: processes });
    }
    for (const process of [-1, 2, 0.5]) {
      const error = refusal(() =>
        statefulSetWorkerId({ hostname: "leaf-1", processes: 2, process }),
      );
      expect(error.details).toMatchObject({ key: "statefulSet.process", value: process });
      expect(error.message).toContain("an integer from 0 to 1 (statefulSet.processes is 2)");
    }
  });

  it("gives two StatefulSets with offsets disjoint worker ids", () => {
    const a = [0, 1, 2].map((i) => statefulSetWorkerId({ hostname: `orders-a-${i}` }).workerId);
    const b = [0, 1, 2].map(
      (i) => statefulSetWorkerId({ hostname: `orders-b-${i}`, offset: 100 }).workerId,
    );
    expect(new Set([...a, ...b]).size).toBe(6);
    expect(b).toEqual([100, 101, 102]);
  });

  it("restarts a pod with its id and the last timestamp it reported, from its own volume", async () => {
    const pvc = volume();
    const first = new LocalRegistry({ statefulSet: { hostname: "leaf-3" }, dir: pvc });
    const lease = await first.acquire({ node, maxWorkerId: layouts.leaf.maxWorkerId });
    expect(lease.workerId).toBe(3);
    expect(first.pod?.hostname).toBe("leaf-3");
    const reported = Date.now();
    await lease.report(reported);
    await lease.release(reported);
    // Rescheduled on another node: a new ip, the same name and volume.
    const again = new LocalRegistry({ statefulSet: { hostname: "leaf-3" }, dir: pvc });
    const next = await again.acquire({ node: { ...node, ip: "10.244.2.9" }, maxWorkerId: 1023 });
    expect(next.workerId).toBe(3);
    expect(next.lastTimestamp).toBe(reported);
    await next.release();
  });

  it("refuses an ordinal past the layout's worker range, and backup ids, naming the pod", async () => {
    const big = new LocalRegistry({
      statefulSet: { hostname: "leaf-30", offset: 1000 },
      dir: volume(),
    });
    const error = await big.acquire({ node, maxWorkerId: 1023 }).then(
      () => undefined,
      (e: unknown) => e as LeafError,
    );
    expect(error?.code).toBe(ErrorCodes.WORKER_IDS_EXHAUSTED);
    expect(error?.message).toContain("worker id 1030 of pod leaf-30 (ordinal 30 + offset 1000)");
    const second = new LocalRegistry({
      statefulSet: { hostname: "leaf-511", processes: 2, process: 1 },
      dir: volume(),
    });
    const past = await second.acquire({ node, maxWorkerId: 1022 }).then(
      () => undefined,
      (e: unknown) => e as LeafError,
    );
    expect(past?.message).toContain(
      "worker id 1023 of pod leaf-511 (ordinal 511 x 2 processes + process 1 + offset 0)",
    );
    const pod = new LocalRegistry({ statefulSet: { hostname: "leaf-1" }, dir: volume() });
    const backups = await pod.acquire({ node, maxWorkerId: 1023, backups: 1 }).then(
      () => undefined,
      (e: unknown) => e as LeafError,
    );
    expect(backups?.code).toBe(ErrorCodes.WORKER_IDS_EXHAUSTED);
    expect(backups?.message).toContain("a StatefulSet pod has exactly one worker id");
  });
});
