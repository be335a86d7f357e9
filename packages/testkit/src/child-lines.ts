// Reading what a child process prints, line by line, with a deadline: for tests that drive a
// separate process through its stdin and watch its stdout.
import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";

/** ms a wait for a child's output lasts by default before it fails. */
const DEFAULT_TIMEOUT_MS = 30_000;

/** How much of a child's stderr (the last characters) a failed wait shows. */
const STDERR_TAIL = 4000;

/**
 * Collects a child's stdout lines as they come (create it right after spawning, before the child
 * prints). `lines` holds every line; `next()` hands them out one at a time; `until()` waits for a
 * condition on all of them. Waits fail with the child's output when it exits first.
 */
export class ChildLines {
  /** Every line the child printed so far, without the newline. */
  readonly lines: string[] = [];
  /** Resolves once the child has exited (and been reaped). */
  readonly exited: Promise<void>;
  private waiters: (() => void)[] = [];
  private read = 0;
  private stderrTail = "";

  constructor(readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      this.lines.push(line);
      for (const wake of this.waiters.splice(0)) wake();
    });
    // Kept (its end) for the error of a wait the child's exit cut short; reading it also keeps a
    // chatty child from blocking on a full pipe.
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL);
    });
    this.exited = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once("exit", () => resolve());
    });
  }

  /** The lines that are JSON objects (starting with "{"), parsed. */
  json<T = Record<string, unknown>>(): T[] {
    return this.lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as T);
  }

  /** Waits until `check` holds for the lines seen so far; `what` names it in the error. */
  async until(
    check: (lines: string[]) => boolean,
    what: string,
    timeoutMs = DEFAULT_TIMEOUT_MS,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check(this.lines)) {
      if (this.child.exitCode !== null || this.child.signalCode !== null) {
        await this.closed(1000);
        if (check(this.lines)) return;
        const how =
          this.child.signalCode !== null
            ? `on ${this.child.signalCode}`
            : `with code ${this.child.exitCode}`;
        throw new Error(
          `child exited ${how} before ${what}; it printed: ${this.lines.join("\n")}` +
            (this.stderrTail ? `\nand on stderr: ${this.stderrTail}` : ""),
        );
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Waits (at most `ms`) until the child's output pipes have closed: all it wrote has been read. */
  private closed(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      const out = this.child.stdout;
      if (!out || out.closed || out.destroyed) done();
      else this.child.once("close", done);
    });
  }

  /**
   * The next line not yet returned by `next()`, waiting for it when the child has not printed it.
   */
  async next(what = "the next line", timeoutMs = DEFAULT_TIMEOUT_MS): Promise<string> {
    await this.until((lines) => lines.length > this.read, what, timeoutMs);
    return this.lines[this.read++]!;
  }

  /** SIGKILL, resolved once the child has exited (and been reaped). */
  async kill(): Promise<void> {
    this.child.kill("SIGKILL");
    await this.exited;
  }
}
