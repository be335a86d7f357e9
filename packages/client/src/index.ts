// @leaf/client: ids at memory speed for Node services, from a pool of Leaf servers with failover.
export {
  ClientErrorCodes,
  isLeafClientError,
  LeafClientError,
  type LeafClientErrorOptions,
} from "./errors";
export {
  type BreakerOptions,
  LeafClient,
  type LeafClientOptions,
  type SegmentOptions,
  type SnowflakeOptions,
} from "./leaf-client";
export { type CallOptions, type IdType, SegmentIds, type SegmentStats } from "./segment-ids";
export type { BreakerState, ServerHealth } from "./server-pool";
export { SnowflakeIds } from "./snowflake-ids";
