// Two faults in one, with a competitor (issue 24, item 3): a holder's wall clock stepped forward 8
// or 12 s just after a renewal could have stored its horizon, its link to the registry cut 60 ms
// later, while the spare (standby or second pod) asks for its worker id and takes it over when the
// lease lapses. The spare must start after the horizon the store last confirmed, or it issues ids
// the holder dated ahead already (takeover.ts).
import type { Family } from "../families";
import type { Fault } from "./fault";
import {
  holders,
  spareOf,
  startTakeover,
  stopTakeover,
  takeoverEffects,
  takeoverResources,
} from "./takeover";

function kindOf(family: Family): "standby" | "second-pod" {
  return family.servers.some((s) => s.spare === "second-pod") ? "second-pod" : "standby";
}

export const clockForwardCut: Fault = {
  name: "clock-forward-cut",
  title:
    "a holder's wall clock stepped forward 8 or 12 s, its link to the registry cut 60 ms later for 15-22 s, while the spare asks for its worker id; then both run 3 s",
  targets: (family) => holders(family, kindOf(family)),
  resources: (target, family) => takeoverResources(family, target, spareOf(family, kindOf(family))),
  // The step is shorter than the spare runs (it takes over after a lease and a process start, 4-9
  // s, and runs to the end + 3 s), so that a spare dated below the holder's last ids reaches them;
  // and longer than a start, or the holder's ids dated ahead are behind the spare's first tick
  // already.
  durationMs: [15_000, 22_000],
  params: (rng) => ({ forwardMs: rng.pick([8000, 12_000]) }),
  start: (c, family, target, params) =>
    startTakeover(c, family, target, spareOf(family, kindOf(family)), "clock-forward-cut", params),
  stop: (c, family, target, params) =>
    stopTakeover(c, family, target, spareOf(family, kindOf(family)), "clock-forward-cut", params),
  effects: (family, target) =>
    takeoverEffects(family, target, spareOf(family, kindOf(family)), "clock-forward-cut"),
};
