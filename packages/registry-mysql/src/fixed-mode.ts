import { ErrorCodes, LeafError } from "@leaf/core";
import {
  bareMessage,
  type CheckedAcquireRequest,
  checkClockNotBehind,
  readLeaseCache,
} from "@leaf/core/adapter";
import type { Connection } from "mysql2/promise";
import { COMPONENT, isUnreachable, runOn } from "./database";
import { FixedLease } from "./fixed-lease";
import {
  type FixedSettings,
  findOrCreateRow,
  fixedCacheFile,
  fixedLockName,
  takeLock,
} from "./fixed-table";
import { refuseLeaseModeRow } from "./mode-guard";

/** Grants the fixed worker id of `request.node`, or falls back to the cache when MySQL is down. */
export async function acquireFixed(
  settings: FixedSettings,
  request: CheckedAcquireRequest,
): Promise<FixedLease> {
  if (request.backups > 0) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.INVALID_ARGUMENT,
      message:
        `${request.backups} backup worker id(s) requested, but fixed mode gives each ip:port ` +
        'exactly one worker id (the fork\'s table); use mode "lease" for backup ids',
      details: { name: "backups", value: request.backups },
    });
  }
  let connection: Connection;
  try {
    connection = await settings.db.hold("taking a fixed worker id");
  } catch (error) {
    if (isUnreachable(error)) return fallback(settings, request, error as LeafError);
    throw error;
  }
  let lockedName: string | undefined;
  try {
    const timeout = settings.db.timeoutMs;
    const row = await findOrCreateRow(connection, settings.table, request, timeout);
    const workerId = row.id;
    if (workerId > request.maxWorkerId) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.WORKER_IDS_EXHAUSTED,
        message:
          `worker id ${workerId} (the id of ${request.key}'s row in ${settings.table}) is outside the ` +
          `layout's range 0..${request.maxWorkerId}: rows are never reused, so this table has ` +
          'handed out more ids than the layout holds; use mode "lease" (ids recycled) or a layout ' +
          "with more worker bits",
        details: { workerId, maxWorkerId: request.maxWorkerId, node: request.key },
      });
    }
    const lockName = fixedLockName(row.database, settings.table, workerId);
    await takeLock(connection, lockName, workerId, request.key, timeout);
    lockedName = lockName;
    // Read after the row was written: a lease-mode start racing this one either sees the row or
    // wrote its lease row first, which this read sees.
    try {
      await refuseLeaseModeRow(
        connection,
        settings.leaseTable,
        request.node.name,
        workerId,
        request.key,
        timeout,
      );
    } catch (error) {
      // A row inserted by this start has issued nothing: removed, it leaves the id to lease mode.
      if (row.inserted) {
        await runOn(
          connection,
          `DELETE FROM \`${settings.table}\` WHERE id = ? AND ip_port = ?`,
          [workerId, request.key],
          timeout,
          `removing the row of ${request.key} from ${settings.table}`,
        ).catch(() => undefined);
      }
      throw error;
    }
    // Ids issued while MySQL was down last time are only in the cache file: count them too.
    const stored = Math.max(row.maxTimestamp, cachedTimestamp(settings, request, workerId));
    checkClockNotBehind({
      component: COMPONENT,
      lastTimestamp: stored,
      now: settings.clock.now(),
      toleranceMs: settings.toleranceMs,
      source:
        stored > row.maxTimestamp
          ? `cache file ${fixedCacheFile(settings.cacheDir!, request.node)}`
          : `${settings.table}.max_timestamp of ${request.key}`,
      workerId,
    });
    const lease = new FixedLease(settings, request.node, workerId, stored, lockName);
    lease.writeCache();
    lease.attached(connection);
    return lease;
  } catch (error) {
    // A refused start frees its lock before it returns, so an immediate retry (after the operator
    // fixed the clock) is not refused as "held by another live process": the server drops the
    // lock of a destroyed connection only when it notices the disconnect, a moment later.
    if (lockedName !== undefined) {
      await runOn(
        connection,
        "SELECT RELEASE_LOCK(?)",
        [lockedName],
        settings.db.timeoutMs,
        "releasing the lock of a refused start",
      ).catch(() => undefined);
    }
    // Named locks die with the session: never hand a connection that may hold one back to a pool.
    connection.destroy();
    if (isUnreachable(error)) return fallback(settings, request, error as LeafError);
    throw error;
  }
}

/** MySQL is down: the cached lease, only when its timestamp passes the clock check (Leaf #97). */
function fallback(
  settings: FixedSettings,
  request: CheckedAcquireRequest,
  cause: LeafError,
): FixedLease {
  if (!settings.cacheDir) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `${bareMessage(cause)}; no fallback: cacheDir is disabled`,
      details: { ...cause.details },
      cause,
    });
  }
  const file = fixedCacheFile(settings.cacheDir, request.node);
  const cached = readLeaseCache(file, COMPONENT);
  if (!cached) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message:
        `${bareMessage(cause)}; no fallback: ${request.key} has no ` +
        `cache file ${file} (it never started here against MySQL)`,
      details: { ...cause.details, cacheFile: file },
      cause,
    });
  }
  if (
    cached.registry !== "mysql" ||
    cached.node.ip !== request.node.ip ||
    cached.node.port !== request.node.port
  ) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CORRUPT_DATA,
      message:
        `cache file ${file} belongs to ${cached.node.ip}:${cached.node.port} (${cached.registry}), ` +
        `not to ${request.key} (mysql): it was copied or edited; delete it`,
      details: { path: file },
    });
  }
  if (cached.workerId > request.maxWorkerId) {
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.WORKER_IDS_EXHAUSTED,
      message: `cached worker id ${cached.workerId} (${file}) is outside the layout's range 0..${request.maxWorkerId}`,
      details: { workerId: cached.workerId, maxWorkerId: request.maxWorkerId },
    });
  }
  checkClockNotBehind({
    component: COMPONENT,
    lastTimestamp: cached.timestamp,
    now: settings.clock.now(),
    toleranceMs: settings.toleranceMs,
    source: `cache file ${file} (MySQL unreachable: ${cause.details.mysqlCode ?? "no answer"})`,
    workerId: cached.workerId,
  });
  return new FixedLease(settings, request.node, cached.workerId, cached.timestamp, undefined);
}

/**
 * The cached timestamp of this node's worker id, or 0. With MySQL answering, a cache file that is
 * damaged or belongs to another id is ignored (it is rewritten on the first report).
 */
function cachedTimestamp(
  settings: FixedSettings,
  request: CheckedAcquireRequest,
  workerId: number,
): number {
  if (!settings.cacheDir) return 0;
  try {
    const cached = readLeaseCache(fixedCacheFile(settings.cacheDir, request.node), COMPONENT);
    const mine =
      cached?.registry === "mysql" &&
      cached.workerId === workerId &&
      cached.node.ip === request.node.ip &&
      cached.node.port === request.node.port;
    return mine ? cached.timestamp : 0;
  } catch {
    return 0;
  }
}
