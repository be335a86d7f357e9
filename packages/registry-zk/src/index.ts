export { type AclSpec, digestAclId, type ZkAcl, type ZkPermission } from "./acl";
export type {
  DigestAuth,
  PeerClockCheckOptions,
  ZookeeperRegistryMode,
  ZookeeperRegistryOptions,
} from "./options";
export {
  checkJavaLeafName,
  type Endpoint,
  type HolderInfo,
  type LeafTree,
  leafTree,
  type WorkerRecord,
} from "./paths";
export { ZookeeperRegistry } from "./zookeeper-registry";
