export {
  LocalLease,
  LocalRegistry,
  type LocalRegistryOptions,
} from "./local-registry";
export { parseWorkIdMap, type WorkIdMap, type WorkIdMapValue } from "./work-id-map";
