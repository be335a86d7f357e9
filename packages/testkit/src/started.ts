// Builds-and-starts in one expression, for tests: every adapter is `new X(options)` with its
// start-up I/O in `start()` (the construction convention), and tests want both at once.

/** Runs `target.start()` and returns `target`, so a test can write `await started(new X(o))`. */
export async function started<T extends { start(): Promise<unknown> }>(target: T): Promise<T> {
  await target.start();
  return target;
}
