// A layout with one worker id (0 worker bits): two nodes can only ever hold the same id, so a test
// that hands an id from one node to another hands over exactly that one.
import { defineLayout, layouts } from "@leaf/core";

export const ONE_WORKER = defineLayout({
  name: "one-worker",
  timestampBits: 41,
  workerBits: 0,
  sequenceBits: 12,
  unitMillis: 1,
  epoch: layouts.leaf.epoch,
});
