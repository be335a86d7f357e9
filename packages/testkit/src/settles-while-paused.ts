// Whether a call ends while the server it talks to is stopped (SIGSTOP): a close or a release that
// waits for a server that does not answer is told from one that ends on its own timeouts, and the
// test fails on its assertion, not on vitest's timeout, since the server is resumed either way.
import { performance } from "node:perf_hooks";

/** What {@link settlesWhilePaused} saw. */
export interface PausedOutcome<T> {
  /** True when the promise settled before the server was resumed. */
  whilePaused: boolean;
  /** How the promise settled (after the server was resumed, when it had not before). */
  result: PromiseSettledResult<T>;
  /** ms from the call until the promise settled. */
  settledAfterMs: number;
}

/**
 * Waits up to `pausedMs` for `promise` to settle while `server` is stopped, then resumes the server
 * (SIGCONT) and waits for the promise in any case. The server must be paused by the caller, before
 * the call whose promise is passed.
 */
export async function settlesWhilePaused<T>(
  server: { resume(): void },
  promise: Promise<T>,
  pausedMs: number,
): Promise<PausedOutcome<T>> {
  const startedAt = performance.now();
  let settledAfterMs: number | undefined;
  const watched = promise.then(
    (value): PromiseSettledResult<T> => ({ status: "fulfilled", value }),
    (reason: unknown): PromiseSettledResult<T> => ({ status: "rejected", reason }),
  );
  const timed = watched.finally(() => {
    settledAfterMs = performance.now() - startedAt;
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    timed,
    new Promise((resolve) => {
      timer = setTimeout(resolve, pausedMs);
    }),
  ]);
  clearTimeout(timer);
  const whilePaused = settledAfterMs !== undefined;
  server.resume();
  const result = await timed;
  return { whilePaused, result, settledAfterMs: Math.round(settledAfterMs!) };
}
