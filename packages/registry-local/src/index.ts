export {
  LocalLease,
  LocalRegistry,
  type LocalRegistryOptions,
} from "./local-registry";
export { type StatefulSetId, type StatefulSetOptions, statefulSetWorkerId } from "./stateful-set";
export { parseWorkIdMap, type WorkIdMap, type WorkIdMapValue } from "./work-id-map";
