// Small helpers for the kit's own tests: is a process still running, and polling with a deadline.
import { existsSync, readFileSync } from "node:fs";

/** Whether `pid` is a running process (a zombie counts as gone: it has exited). */
export function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    if (existsSync("/proc/self")) return false;
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

/** Polls `condition` every 50 ms until it holds; throws `message` after `timeoutMs`. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  message: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${message}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
