// A clock one process sees, moved while it runs: libfaketime (Debian's `faketime` package)
// preloaded into the process reads its offset from a file the test rewrites.
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { TestkitError } from "./errors";

/**
 * Where Debian and Ubuntu install libfaketime's thread-safe variant (Node runs several threads).
 */
const LIBRARY_CANDIDATES = [
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
  "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
  "/usr/lib/faketime/libfaketimeMT.so.1",
  "/usr/local/lib/faketime/libfaketimeMT.so.1",
];

/**
 * Variables that name libfaketime's path elsewhere (the second is the chaos suite's older name).
 */
const LIBRARY_VARIABLES = ["LEAF_TEST_LIBFAKETIME", "LEAF_CHAOS_LIBFAKETIME"] as const;

/**
 * The path of libfaketime (`libfaketimeMT.so.1`), or undefined when it is not installed. A path in
 * LEAF_TEST_LIBFAKETIME (or LEAF_CHAOS_LIBFAKETIME) replaces the search.
 */
export function findLibfaketime(): string | undefined {
  for (const name of LIBRARY_VARIABLES) {
    const fromEnv = process.env[name];
    if (fromEnv) return existsSync(fromEnv) ? fromEnv : undefined;
  }
  return LIBRARY_CANDIDATES.find((path) => existsSync(path));
}

/** Options of a {@link FakeClock}. */
export interface FakeClockOptions {
  /** The file that holds the offset (created, or overwritten, with offset 0). */
  file: string;
  /** libfaketime's path (default: {@link findLibfaketime}). */
  library?: string;
}

/**
 * The wall clock of one process: real time plus an offset the test can change while the process
 * runs. Only the wall clock moves: monotonic time (timers, timeouts, performance.now()) and file
 * times stay real, as on a machine whose NTP daemon steps the clock.
 */
export class FakeClock {
  readonly file: string;
  readonly library: string;
  private current = 0;

  /** Throws TESTKIT_BINARY_MISSING when libfaketime is not installed. Writes offset 0. */
  constructor(options: FakeClockOptions) {
    if (typeof options?.file !== "string" || options.file.length === 0) {
      throw new TestkitError(
        "TESTKIT_BAD_OPTION",
        `FakeClock option file must be a file path, got ${JSON.stringify(options?.file)}`,
      );
    }
    const library = options.library ?? findLibfaketime();
    if (library === undefined) {
      throw new TestkitError(
        "TESTKIT_BINARY_MISSING",
        "libfaketime is not installed: install Debian's `faketime` package (apt-get install " +
          "faketime), or set LEAF_TEST_LIBFAKETIME to the path of libfaketimeMT.so.1",
      );
    }
    this.file = options.file;
    this.library = library;
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
      throw new TestkitError(
        "TESTKIT_BAD_OPTION",
        `a clock offset is a whole number of ms, got ${offsetMs}`,
      );
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
