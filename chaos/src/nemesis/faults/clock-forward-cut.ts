// Two faults in one, with a competitor (issue 24, item 3): a holder's wall clock stepped forward 3,
// 5 or 8 s just after a renewal could have stored its horizon, its link to the registry cut 60 ms
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
    "a holder's wall clock stepped forward 3, 5 or 8 s, its link to the registry cut 60 ms later for 8-15 s, while the spare asks for its worker id; then both run 3 s",
  targets: (family) => holders(family, kindOf(family)),
  resources: (target, family) => takeoverResources(family, target, spareOf(family, kindOf(family))),
  durationMs: [8000, 15_000],
  // Shorter than the spare runs (up to 15 s), so that a spare dated below the holder's horizon
  // reaches the times the holder already issued (the spare may take 7 s to start on a busy machine).
  params: (rng) => ({ forwardMs: rng.pick([3000, 5000, 8000]) }),
  start: (c, family, target, params) =>
    startTakeover(c, family, target, spareOf(family, kindOf(family)), "clock-forward-cut", params),
  stop: (c, family, target) =>
    stopTakeover(c, family, target, spareOf(family, kindOf(family)), "clock-forward-cut"),
  effects: (family, target) =>
    takeoverEffects(family, target, spareOf(family, kindOf(family)), "clock-forward-cut"),
};
