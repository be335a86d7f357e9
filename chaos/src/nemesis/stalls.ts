// CPU starvation as a fault: on a machine shared with other work a server process (or the whole
// machine) can stop running for seconds with no fault injected, and a lease really lapses then:
// LEASE_LOST is the documented outcome. So stalls are measured, not assumed: each server process
// records its own (stall-watch.mjs, a 50 ms timer firing late), the nemesis its own (the same timer
// here: when the process that drives the load stalls, the machine is starved). A stall of STALL_MS
// or more becomes a window in which the family's store codes are accepted on that server (every
// server, for the nemesis's own stalls); shorter ones are only counted. Windows are reported.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Window } from "./checker";
import type { Family } from "./families";
import { NO_ANSWER } from "./faults/fault";

/**
 * A stall this long or longer is a fault window: a third of the 3 s leases (a renewal's interval).
 */
export const STALL_MS = 1000;
const TICK_MS = 50;

/** NODE_OPTIONS and the stall file of a server process (`dir/label.stalls`). */
export function stallWatchEnv(dir: string, label: string): Record<string, string> {
  const module = fileURLToPath(new URL("./stall-watch.mjs", import.meta.url));
  const inherited = process.env.NODE_OPTIONS ?? "";
  return {
    NODE_OPTIONS: `${inherited} --import ${module}`.trim(),
    NEMESIS_STALL_FILE: join(dir, `${label}.stalls`),
  };
}

/** One stall on the nemesis's timeline. */
export interface Stall {
  /** Server label, or "*" for the nemesis process (the machine). */
  server: string;
  fromMs: number;
  ms: number;
}

/** Watches the nemesis's own event loop from `begin()` until `stop()`. */
export class OwnStalls {
  readonly stalls: Stall[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly toRunMs: (hr: bigint) => number) {}

  begin(): void {
    let last = process.hrtime.bigint();
    this.timer = setInterval(() => {
      const now = process.hrtime.bigint();
      const ms = Number(now - last) / 1e6;
      if (ms - TICK_MS >= STALL_MS)
        this.stalls.push({ server: "*", fromMs: this.toRunMs(last), ms });
      last = now;
    }, TICK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/** The stalls each server recorded in `dir`. */
export function serverStalls(
  dir: string,
  labels: string[],
  toRunMs: (hr: bigint) => number,
): Stall[] {
  const stalls: Stall[] = [];
  for (const label of labels) {
    const file = join(dir, `${label}.stalls`);
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, "utf8").split("\n")) {
      const [start, ms] = line.split(",");
      if (!start || !ms) continue;
      stalls.push({ server: label, fromMs: toRunMs(BigInt(start)), ms: Number(ms) });
    }
  }
  return stalls;
}

/**
 * Windows for the stalls of STALL_MS or more: the family's store codes, and no answer meanwhile.
 */
export function stallWindows(family: Family, stalls: Stall[]): Window[] {
  return stalls
    .filter((s) => s.ms >= STALL_MS)
    .map((s) => ({
      step: 0,
      fault: "stall",
      target: s.server === "*" ? "machine" : s.server,
      fromMs: s.fromMs,
      stoppedMs: s.fromMs + s.ms,
      toMs: s.fromMs + s.ms + family.recoveryMs,
      effects: [{ servers: [s.server], codes: [...NO_ANSWER, ...family.storeCodes] }],
    }));
}
