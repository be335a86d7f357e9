// The generator: from a seed, a family and a length, a schedule of faults drawn from the catalogue,
// several overlapping, never two holding one resource at once (one server's process, one clock,
// one link, one store). The same seed, family and length always give the same schedule.
import type { Family } from "./families";
import { CATALOGUE, faultNamed } from "./faults/catalogue";
import type { Params } from "./faults/fault";
import { Prng } from "./prng";

/** One fault of a schedule. */
export interface Step {
  /** Its number in the schedule it was drawn in (kept when others are dropped). */
  id: number;
  fault: string;
  target: string;
  atMs: number;
  durationMs: number;
  params: Params;
}

/** A schedule for one family. */
export interface Schedule {
  family: string;
  seed: number;
  /** Length of the run in ms (load runs the whole time). */
  durationMs: number;
  steps: Step[];
}

/** Load before the first fault, ms. */
export const WARMUP_MS = 3000;
/** Quiet time after the last fault ends, ms (recovery is watched). */
export const TAIL_MS = 8000;
/** Most faults active at once. */
const MAX_CONCURRENT = 3;

/** Draws a schedule. `exclude` names faults not to draw. */
export function generate(
  family: Family,
  seed: number,
  durationMs: number,
  exclude: readonly string[] = [],
): Schedule {
  for (const name of exclude) faultNamed(name);
  const rng = new Prng(seed, family.name);
  const faults = CATALOGUE.filter((f) => !exclude.includes(f.name) && f.targets(family).length > 0);
  const steps: Step[] = [];
  const last = durationMs - TAIL_MS;
  // About one fault every 4 s on average; each lasts 0.2-12 s, so several overlap.
  const attempts = Math.max(1, Math.round((last - WARMUP_MS) / 2500));
  for (let i = 0; i < attempts && faults.length > 0; i++) {
    const fault = rng.pick(faults);
    const target = rng.pick(fault.targets(family));
    const duration = rng.int(fault.durationMs[0], fault.durationMs[1]);
    const params = fault.params?.(rng) ?? {};
    if (last - duration <= WARMUP_MS) continue;
    const atMs = rng.int(WARMUP_MS, last - duration);
    const step: Step = { id: 0, fault: fault.name, target, atMs, durationMs: duration, params };
    if (fits(family, step, steps)) steps.push(step);
  }
  steps.sort((a, b) => a.atMs - b.atMs);
  steps.forEach((s, i) => {
    s.id = i + 1;
  });
  return { family: family.name, seed, durationMs, steps };
}

/** A step's resources, with a margin of 2 s (restarts take time). */
function fits(family: Family, step: Step, steps: Step[]): boolean {
  const resources = new Set(faultNamed(step.fault).resources(step.target, family));
  const from = step.atMs;
  const to = step.atMs + step.durationMs;
  const overlapping = steps.filter(
    (s) => s.atMs < to + 2000 && from < s.atMs + s.durationMs + 2000,
  );
  if (overlapping.length >= MAX_CONCURRENT) return false;
  return !overlapping.some((s) =>
    faultNamed(s.fault)
      .resources(s.target, family)
      .some((r) => resources.has(r)),
  );
}

/** The schedule without the steps `ids`, ending TAIL_MS after its last fault (or as long, if none). */
export function without(schedule: Schedule, ids: readonly number[]): Schedule {
  return keep(
    schedule,
    schedule.steps.filter((s) => !ids.includes(s.id)),
  );
}

/** The schedule without every step that starts at `ms` or later (it cannot cause what came first). */
export function cutAt(schedule: Schedule, ms: number): Schedule {
  return keep(
    schedule,
    schedule.steps.filter((s) => s.atMs < ms),
  );
}

function keep(schedule: Schedule, steps: Step[]): Schedule {
  const end = Math.max(WARMUP_MS, ...steps.map((s) => s.atMs + s.durationMs)) + TAIL_MS;
  return { ...schedule, steps, durationMs: Math.min(schedule.durationMs, end) };
}

/** "#3 server-kill A at 12.3 s for 2.1 s {…}". */
export function describeStep(step: Step): string {
  const params = Object.keys(step.params).length > 0 ? ` ${JSON.stringify(step.params)}` : "";
  return `#${step.id} ${step.fault} ${step.target} at ${(step.atMs / 1000).toFixed(1)} s for ${(step.durationMs / 1000).toFixed(1)} s${params}`;
}
