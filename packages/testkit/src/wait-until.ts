// Polling for a condition in a fault test: the machines are shared and slow, so tests wait for what
// they need to see rather than sleep a fixed time.
import { performance } from "node:perf_hooks";

/**
 * Polls `check` (it may be async) every `intervalMs` until it answers something other than
 * undefined, and resolves with that answer; resolves with undefined once `timeoutMs` has passed
 * (`check` is always asked at least once).
 */
export async function pollFor<T>(
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
  intervalMs = 50,
): Promise<T | undefined> {
  const until = performance.now() + timeoutMs;
  for (;;) {
    const found = await check();
    if (found !== undefined || performance.now() > until) return found;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/**
 * Resolves once `check` returns true (it may be async), polling every `intervalMs`; throws
 * "timed out waiting for {what}" after `timeoutMs`.
 */
export async function waitUntil(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 60_000,
  intervalMs = 50,
): Promise<void> {
  const seen = await pollFor(
    async () => ((await check()) ? true : undefined),
    timeoutMs,
    intervalMs,
  );
  if (seen === undefined) throw new Error(`timed out waiting for ${what}`);
}
