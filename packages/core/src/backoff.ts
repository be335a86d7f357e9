// Retry delays shared by every component that reconnects or reloads: exponential with full jitter,
// capped, so that many nodes coming back after an outage do not retry in step.

/** Options of {@link backoffDelay}. */
export interface BackoffOptions {
  /** First delay in ms (default 100). */
  initialMs?: number;
  /** Largest delay in ms (default 10,000). */
  maxMs?: number;
  /** Growth per attempt (default 2). */
  factor?: number;
  /** Random source in [0, 1), for tests (default Math.random). */
  random?: () => number;
}

/** Delay in ms before retry number `attempt` (0 for the first retry). */
export function backoffDelay(attempt: number, options: BackoffOptions = {}): number {
  const { initialMs = 100, maxMs = 10_000, factor = 2, random = Math.random } = options;
  const ceiling = Math.min(maxMs, initialMs * factor ** Math.max(0, attempt));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
