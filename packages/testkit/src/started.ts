// Builds-and-starts in one expression, for tests: every adapter is `new X(options)` with its
// start-up I/O in `start()` (the construction convention), and tests want both at once.

/** Runs `target.start()` and returns `target`, so a test can write `await started(new X(o))`. */
export async function started<T extends { start(): Promise<unknown> }>(target: T): Promise<T> {
  await target.start();
  return target;
}

/**
 * Runs `attempt` (a start: `() => started(new X(o))`) again until it resolves, while it fails with
 * one of `codes` (the error's `code`) and `deadline` (a Date.now() value) has not passed: for a
 * holder whose store may be slow to answer on a loaded machine (UNAVAILABLE), or whose id is still
 * held (WORKER_IDS_EXHAUSTED). Each refused attempt is reported through `onRetry`; any other error,
 * or one past the deadline, is thrown.
 */
export async function startedRetrying<T>(
  attempt: () => Promise<T>,
  {
    codes,
    deadline,
    pauseMs = 50,
    onRetry,
  }: {
    codes: readonly string[];
    deadline: number;
    pauseMs?: number;
    onRetry?: (error: unknown) => void;
  },
): Promise<T> {
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (typeof code !== "string" || !codes.includes(code) || Date.now() > deadline) throw error;
      onRetry?.(error);
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }
}
