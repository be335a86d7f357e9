// A clock one server process sees, moved while it runs: libfaketime (Debian's `faketime` package)
// preloaded into the process reads its offset from a file the harness rewrites.
import { existsSync, rmSync, writeFileSync } from "node:fs";

/** Where Debian and Ubuntu install libfaketime's thread-safe variant (Node runs several threads). */
const LIBRARY_CANDIDATES = [
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
  "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
  "/usr/lib/faketime/libfaketimeMT.so.1",
  "/usr/local/lib/faketime/libfaketimeMT.so.1",
];

/** The path of libfaketime, or undefined when it is not installed. */
export function findLibfaketime(): string | undefined {
  const fromEnv = process.env.LEAF_CHAOS_LIBFAKETIME;
  if (fromEnv) return existsSync(fromEnv) ? fromEnv : undefined;
  return LIBRARY_CANDIDATES.find((path) => existsSync(path));
}

/**
 * The wall clock of one server process: real time plus an offset the harness can change while the
 * process runs. Only the wall clock moves: monotonic time (timers, timeouts) and file times stay
 * real, as on a machine whose NTP daemon steps the clock.
 */
export class FakeClock {
  private current = 0;

  /** `file` holds the offset; `library` is libfaketime's path (see {@link findLibfaketime}). */
  constructor(
    readonly file: string,
    private readonly library: string,
  ) {
    this.write(0);
  }

  /** The offset now in force, in ms (negative: the clock is behind real time). */
  get offsetMs(): number {
    return this.current;
  }

  /** Environment variables that start a process under this clock. */
  env(): Record<string, string> {
    return {
      LD_PRELOAD: this.library,
      FAKETIME_TIMESTAMP_FILE: this.file,
      // Read the file at every clock reading (about 4 us each) so a new offset applies at once.
      FAKETIME_NO_CACHE: "1",
      FAKETIME_DONT_FAKE_MONOTONIC: "1",
      NO_FAKE_STAT: "1",
    };
  }

  /** Moves the clock to real time + `offsetMs`; the process sees it at its next clock reading. */
  set(offsetMs: number): void {
    if (!Number.isInteger(offsetMs)) {
      throw new Error(`[leaf] [chaos] a clock offset is a whole number of ms, got ${offsetMs}`);
    }
    this.write(offsetMs);
  }

  /**
   * Removes the shared-memory files libfaketime made for process `pid`: it leaves them behind when
   * the process is killed (or exits without running its destructors), and a later process with the
   * same pid would trip over them.
   */
  cleanUp(pid: number): void {
    for (const name of [`faketime_shm_${pid}`, `sem.faketime_sem_${pid}`]) {
      rmSync(`/dev/shm/${name}`, { force: true });
    }
  }

  private write(offsetMs: number): void {
    // libfaketime's relative form: seconds with a sign, "." as the decimal point in the C locale.
    const sign = offsetMs < 0 ? "-" : "+";
    writeFileSync(this.file, `${sign}${(Math.abs(offsetMs) / 1000).toFixed(3)}\n`);
    this.current = offsetMs;
  }
}
