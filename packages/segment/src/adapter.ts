// `@leaf/segment/adapter`: what a segment store adapter (such as @leaf/segment-mysql) builds on,
// so that every store checks tags, steps and ranges alike and refuses with the same errors. Not for
// applications: `@leaf/segment` is their entry.
export {
  type HostDriver,
  type HostErrorInfo,
  HostedRanges,
  type HostedRangesOptions,
  type HostedStoreStats,
  type RangeAttempt,
  ReadOnlyHost,
} from "./host-failover";
export {
  type CheckedStoreOptions,
  checkStoreOptions,
  checkTableName,
  deletedTableName,
  type ParsedStoreUrl,
  type StoreHost,
  type StoreOptionRules,
  type StoreOptions,
  type StorePoolOptions,
  type TableNaming,
} from "./host-options";
export {
  checkExpectedVersion,
  checkResidueRecord,
  type ResidueRow,
  residueMembersText,
  residueRecordOf,
  residueTableName,
} from "./residue-record";
export { STORE_FIXES, type TagRow, tagRecordOf } from "./store-rows";
export {
  badStoredMaxId,
  badStoredStep,
  belowDeletedTag,
  COMPONENT,
  checkStep,
  checkTag,
  closedError,
  floorOf,
  MAX_ID,
  maxIdMovedBack,
  normalizeNewTag,
  RangeFloors,
  rangeOverflow,
  tagExists,
  unknownTag,
} from "./validation";
