// Reading what a child process prints, line by line, with a deadline (same as registry-local's).
import type { ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";

/** Collects a child's stdout lines as they come. */
export class ChildLines {
  readonly lines: string[] = [];
  private waiters: (() => void)[] = [];
  readonly exited: Promise<void>;

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

  /** The parsed JSON lines. */
  json<T = Record<string, unknown>>(): T[] {
    return this.lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as T);
  }

  /** Waits until `check` holds for the lines seen so far. */
  async until(check: (lines: string[]) => boolean, what: string, timeoutMs = 30_000) {
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

  /** SIGKILL, resolved once the child has exited (and been reaped). */
  async kill(): Promise<void> {
    this.child.kill("SIGKILL");
    await this.exited;
  }
}
