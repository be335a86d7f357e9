// The server's own settings: service name, data folder, log level, and where and how it listens.
// A configuration that names a shared store or registry is a deployment other hosts call.
import { resolve } from "node:path";
import { REGISTRIES, SEGMENT_STORES } from "./backends/index";
import type { ConfigKey } from "./config-keys";
import type { ServerConfig } from "./config-types";
import type { ConfigValues } from "./config-values";

/** Keys that name a shared store or registry: the server then listens on every interface. */
const EXTERNAL_KEYS: readonly ConfigKey[] = [
  ...[...SEGMENT_STORES, ...REGISTRIES].flatMap((b) => (b.shared ? b.addressKeys : [])),
  "redisSequence.url",
];

/** The settings every mode shares, and where the server listens. */
export function serverSettings(
  v: ConfigValues,
): Pick<ServerConfig, "name" | "dataDir" | "logLevel" | "server"> {
  // Where to listen. A configuration that names a shared store or registry is a deployment that
  // other hosts call: every interface, as Java Leaf (Spring Boot) does. Otherwise the zero-config
  // demo: loopback only.
  const external = sharedBackendKeys(v);
  const host = v.optional("server.host") ?? (external.length > 0 ? "0.0.0.0" : "127.0.0.1");
  const hostReason = v.has("server.host")
    ? `set by ${v.label("server.host")}`
    : external.length > 0
      ? `every interface, as Java Leaf: the configuration names a shared store or registry (${external.map((k) => v.writtenName(k)).join(", ")}); set server.host to change`
      : "loopback only: no shared store or registry is configured (demo set-up); set server.host=0.0.0.0 to serve other hosts";
  return {
    name: v.get("name"),
    dataDir: resolve(v.cwd, v.get("dataDir")),
    logLevel: v.get("log.level"),
    server: {
      host,
      hostReason,
      port: v.get("server.port"),
      maxBatch: v.get("server.maxBatch"),
      adminToken: v.optional("server.adminToken"),
      accessTokens: v.optional("server.accessTokens"),
      requestLog: v.get("server.requestLog"),
      drainMs: v.get("server.drainMs"),
      shutdownTimeoutMs: v.get("server.shutdownTimeoutMs"),
      monitor: v.get("server.monitor"),
      workers: v.get("server.workers"),
    },
  };
}

/**
 * The keys of `v` that name a shared store or registry (a shared backend's address, the redis
 * sequence's Redis): a configuration other nodes share.
 */
export function sharedBackendKeys(v: ConfigValues): ConfigKey[] {
  return EXTERNAL_KEYS.filter((key) => v.named(key));
}

/** True for addresses only this machine can reach: 127.0.0.0/8, ::1 and "localhost". */
export function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
