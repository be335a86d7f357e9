export { type BuildAppOptions, buildApp, listRoutes } from "./app";
export {
  type LoadConfigOptions,
  type LogLevel,
  loadConfig,
  type RedisSequenceSettings,
  type RegistrySettings,
  type SegmentSettings,
  type ServerConfig,
  type SnowflakeSettings,
  type StoreSettings,
} from "./config";
export { CONFIG_KEYS, envName, type KeyDef } from "./config-keys";
export {
  DECODE_LAYOUTS,
  type DecodeAnswer,
  type DecodeLayoutName,
  decodeId,
  javaDecode,
} from "./decode";
export {
  type ErrorBody,
  HttpCodes,
  HttpError,
  type ResponseCode,
  toErrorBody,
} from "./http-errors";
export type { AppContext } from "./id-sources";
export type { LeafServices, RedisSequenceMode, SegmentMode, SnowflakeMode } from "./leaf-services";
export { ServerMetrics } from "./metrics";
export { openApiDocument } from "./openapi";
export { type PropertyEntry, parseProperties } from "./properties";
export { type LeafServer, type StartServerOptions, startServer, VERSION } from "./server";
