// `@leaf/segment/adapter`: what a segment store adapter (such as @leaf/segment-mysql) builds on,
// so that every store checks tags, steps and ranges alike and refuses with the same errors. Not for
// applications: `@leaf/segment` is their entry.
export {
  badStoredMaxId,
  badStoredStep,
  belowDeletedTag,
  COMPONENT,
  checkStep,
  checkTag,
  closedError,
  MAX_ID,
  maxIdMovedBack,
  normalizeNewTag,
  RangeFloors,
  rangeOverflow,
  tagExists,
  unknownTag,
} from "./validation";
