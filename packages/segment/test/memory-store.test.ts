import { segmentStoreConformance } from "@leaf/conformance/segment-store";
import { test } from "vitest";
import { MemorySegmentData, MemorySegmentStore } from "../src/index";

const storages = new Map<string, MemorySegmentData>();

segmentStoreConformance(test, {
  name: "memory store",
  async create({ namespace }) {
    let data = storages.get(namespace);
    if (!data) {
      data = new MemorySegmentData();
      storages.set(namespace, data);
    }
    return new MemorySegmentStore({ data });
  },
  concurrentInstances: true,
  giveBack: true,
  floor: true,
  async editRow({ namespace }, tag, row) {
    const stored = storages.get(namespace)?.rows.get(tag);
    if (!stored) throw new Error(`no row of tag ${tag} in ${namespace}`);
    if (row.maxId !== undefined) stored.maxId = row.maxId;
    if (row.step !== undefined) stored.step = row.step;
  },
});
