// A standby takes a held worker id over (issue 24): the standby server asks for exactly the id a
// holder leases while the holder's lease is made to lapse (its link to the registry cut, or the
// process paused, or paused while it makes batches above a tick's ids), for 8-15 s; then the holder
// is healed and both run side by side (takeover.ts).
import type { Fault } from "./fault";
import {
  holders,
  type Lapse,
  spareOf,
  startTakeover,
  stopTakeover,
  takeoverEffects,
  takeoverResources,
} from "./takeover";

export const standby: Fault = {
  name: "standby",
  title:
    "a standby asks for a holder's worker id while the holder's link to the registry is cut or its process paused (or paused amid batches above a tick's ids), 8-15 s; then both run 3 s",
  targets: (family) => holders(family, "standby"),
  resources: (target, family) => takeoverResources(family, target, spareOf(family, "standby")),
  durationMs: [8000, 15_000],
  params: (rng) => ({ lapse: rng.pick(["cut", "pause", "batch-pause"]) }),
  start: (c, family, target, params) =>
    startTakeover(c, family, target, spareOf(family, "standby"), params.lapse as Lapse, params),
  stop: (c, family, target, params) =>
    stopTakeover(c, family, target, spareOf(family, "standby"), params.lapse as Lapse),
  effects: (family, target, params) =>
    takeoverEffects(family, target, spareOf(family, "standby"), params.lapse as Lapse),
};
