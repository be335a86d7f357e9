// Reading what a child process prints, line by line, with a deadline: for tests that drive a
// separate process through its stdin and watch its stdout.
import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";

/** ms a wait for a child's output lasts by default before it fails. */
const DEFAULT_TIMEOUT_MS = 30_000;

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

  constructor(readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      this.lines.push(line);
      for (const wake of this.waiters.splice(0)) wake();
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
        throw new Error(`child exited before ${what}; it printed: ${this.lines.join("\n")}`);
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
