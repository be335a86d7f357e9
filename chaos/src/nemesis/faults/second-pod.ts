// A second pod with a running pod's StatefulSet ordinal (issue 24, item 4): after a force-delete
// the old pod can still run, cut off from the registry or frozen, while its replacement starts on a
// volume of its own and asks for the same ordinal. The spare pod (S, its HOSTNAME set to the pod
// name of the holder's worker id) tries until the registry grants it, for 8-15 s; then the old pod
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

export const secondPod: Fault = {
  name: "second-pod",
  title:
    "a second pod with a running pod's ordinal while the old pod is cut off from the registry or paused, 8-15 s; then both run 3 s",
  targets: (family) => holders(family, "second-pod"),
  resources: (target, family) => takeoverResources(family, target, spareOf(family, "second-pod")),
  durationMs: [8000, 15_000],
  params: (rng) => ({ lapse: rng.pick(["cut", "pause"]) }),
  start: (c, family, target, params) =>
    startTakeover(c, family, target, spareOf(family, "second-pod"), params.lapse as Lapse, params),
  stop: (c, family, target, params) =>
    stopTakeover(c, family, target, spareOf(family, "second-pod"), params.lapse as Lapse),
  effects: (family, target, params) =>
    takeoverEffects(family, target, spareOf(family, "second-pod"), params.lapse as Lapse),
};
