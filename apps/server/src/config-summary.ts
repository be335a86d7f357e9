// Where a server's configuration came from and a short fingerprint of it, so that an operator can
// see at a glance (monitor page, metrics) whether two nodes run the same settings.
import { createHash } from "node:crypto";
import type { ServerConfig } from "./config";
import { hideUrlPasswords } from "./config-def";

/** What the monitor and the `leaf_server_info` metric show of the configuration. */
export interface ConfigSummary {
  /** The file (absolute path), "options", "environment", or "defaults" when there was none. */
  sources: string[];
  /**
   * First 12 hex digits of the SHA-256 of the effective configuration, secrets left out: equal on
   * two nodes means the same settings (the node's own data folder and port included).
   */
  fingerprint: string;
}

const SECRET = /password|token/i;
const summaries = new WeakMap<ServerConfig, ConfigSummary>();

/** The summary of `config` (computed once per configuration object). */
export function configSummary(config: ServerConfig): ConfigSummary {
  let summary = summaries.get(config);
  if (summary === undefined) {
    const { sources, warnings: _warnings, ...settings } = config;
    const text = JSON.stringify(settings, (key, value: unknown) => {
      if (SECRET.test(key)) return value === undefined ? undefined : "(secret)";
      // A URL's password is a secret too: two nodes differing only in it fingerprint the same.
      if (typeof value === "string") return hideUrlPasswords(value);
      if (value instanceof Map) return Object.fromEntries(value);
      return value;
    });
    summary = {
      sources: sources.length > 0 ? [...sources] : ["defaults"],
      fingerprint: createHash("sha256").update(text).digest("hex").slice(0, 12),
    };
    summaries.set(config, summary);
  }
  return summary;
}
