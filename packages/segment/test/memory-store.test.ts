import { test } from "vitest";
import { MemorySegmentData, MemorySegmentStore, segmentStoreConformance } from "../src/index";

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
});
