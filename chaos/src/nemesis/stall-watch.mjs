// Loaded into every nemesis server process (NODE_OPTIONS=--import): a timer every 50 ms, and each
// time one fires late by STALL_MIN_MS or more (the process was starved of CPU, paused, or its event
// loop blocked), a line "start,ms" appended to NEMESIS_STALL_FILE, start in ns of CLOCK_MONOTONIC
// (process.hrtime; libfaketime leaves it alone), which every process on the machine shares. The
// nemesis reads the file after the run: a stall longer than a third of a lease is a fault window.
import { appendFileSync } from "node:fs";

const file = process.env.NEMESIS_STALL_FILE;
const TICK_MS = 50;
const STALL_MIN_MS = 300;

if (file) {
  let last = process.hrtime.bigint();
  const timer = setInterval(() => {
    const now = process.hrtime.bigint();
    const late = Number(now - last) / 1e6 - TICK_MS;
    if (late >= STALL_MIN_MS) {
      try {
        appendFileSync(file, `${last},${Math.round(late + TICK_MS)}\n`);
      } catch {
        // A full disk or a removed folder: the stall goes unrecorded, the server carries on.
      }
    }
    last = now;
  }, TICK_MS);
  timer.unref();
}
