// What @leaf/core's main entry exported before and keeps for one release: adapter helpers from before
// `@leaf/core/adapter` existed (import them from the subpath), and startSnowflakeWorker from before
// the construction convention (`new SnowflakeWorker(options)` + `start()`).
import * as adapter from "./adapter";
import { SnowflakeWorker, type SnowflakeWorkerOptions } from "./snowflake-worker";

/** @deprecated Import from `@leaf/core/adapter`: adapter helpers leave the main entry. */
export const acquireLockFile: typeof adapter.acquireLockFile = adapter.acquireLockFile;
/** @deprecated Import from `@leaf/core/adapter`: adapter helpers leave the main entry. */
export const readLockFile: typeof adapter.readLockFile = adapter.readLockFile;
/** @deprecated Import from `@leaf/core/adapter`: adapter helpers leave the main entry. */
export type HeldLockFile = adapter.HeldLockFile;
/** @deprecated Import from `@leaf/core/adapter`: adapter helpers leave the main entry. */
export const writeFileAtomic: typeof adapter.writeFileAtomic = adapter.writeFileAtomic;

/**
 * @deprecated Write `const worker = new SnowflakeWorker(options); await worker.start();` (every
 * adapter and generator is `new X(options)` with its start-up work in `start()`). Removed in 1.0.
 */
export async function startSnowflakeWorker(
  options: SnowflakeWorkerOptions,
): Promise<SnowflakeWorker> {
  const worker = new SnowflakeWorker(options);
  await worker.start();
  return worker;
}
