// Polling for a condition in a fault test: the machines are shared and slow, so tests wait for what
// they need to see rather than sleep a fixed time.
import { performance } from "node:perf_hooks";

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
  const until = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
