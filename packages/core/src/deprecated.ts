// Adapter helpers that @leaf/core's main entry exported before `@leaf/core/adapter` existed and that
// @leaf/segment still imports from it. Kept for one release; import them from the subpath.
import * as adapter from "./adapter";

/** @deprecated Import from `@leaf/core/adapter`: adapter helpers leave the main entry. */
export const acquireLockFile: typeof adapter.acquireLockFile = adapter.acquireLockFile;
/** @deprecated Import from `@leaf/core/adapter`: adapter helpers leave the main entry. */
export const readLockFile: typeof adapter.readLockFile = adapter.readLockFile;
/** @deprecated Import from `@leaf/core/adapter`: adapter helpers leave the main entry. */
export type HeldLockFile = adapter.HeldLockFile;
/** @deprecated Import from `@leaf/core/adapter`: adapter helpers leave the main entry. */
export const writeFileAtomic: typeof adapter.writeFileAtomic = adapter.writeFileAtomic;
/** @deprecated Import from `@leaf/core/adapter`: adapter helpers leave the main entry. */
export const parseMysqlUrl: typeof adapter.parseMysqlUrl = adapter.parseMysqlUrl;
/** @deprecated Import from `@leaf/core/adapter`: adapter helpers leave the main entry. */
export const redactMysqlUrl: typeof adapter.redactMysqlUrl = adapter.redactMysqlUrl;
/** @deprecated Import from `@leaf/core/adapter`: adapter helpers leave the main entry. */
export type MysqlHost = adapter.MysqlHost;
/** @deprecated Import from `@leaf/core/adapter`: adapter helpers leave the main entry. */
export type ParsedMysqlUrl = adapter.ParsedMysqlUrl;
