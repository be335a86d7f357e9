// Segment mode's settings: the store (Java Leaf's leaf_alloc table in MySQL, or the embedded one
// for a single node), refused when a second node could serve the same tags from its own store.
import { resolve } from "node:path";
import { DEFAULT_TABLE, parseMysqlUrl } from "@leaf/segment-mysql";
import { mysqlSettings } from "./config-mysql";
import type { MysqlSettings, SegmentSettings } from "./config-types";
import type { ConfigValues } from "./config-values";

/** Where the server runs, as the mode builders need it. */
export interface Placement {
  dataDir: string;
  host: string;
  /** True when `host` is reachable from this machine only. */
  loopback: boolean;
}

/**
 * The name under which the node keeps its high-water marks for the configured store: the embedded
 * store's folder, or for MySQL the database and table without the hosts, so that a failover to
 * another listed host, or the URL pointed at a promoted replica, is still judged by the marks
 * taken before (the case they exist for), while another database starts with none.
 */
export function segmentStoreId(settings: SegmentSettings): string {
  if (settings.store === "embedded" || settings.mysql === undefined) {
    return `embedded:${settings.dir}`;
  }
  const table = settings.mysql.table ?? DEFAULT_TABLE;
  const qualified = table.includes(".")
    ? table
    : `${parseMysqlUrl(settings.mysql.url).database ?? ""}.${table}`;
  return `mysql:${qualified}`;
}

/** Segment mode's settings (the mode is enabled). */
export function segmentSettings(v: ConfigValues, at: Placement): SegmentSettings {
  const store =
    v.optional("segment.store") ?? (v.named("segment.mysql.url") ? "mysql" : "embedded");
  if (store === "embedded" && !v.has("segment.store") && (v.javaLeafFile || !at.loopback)) {
    // Each node with its own embedded store hands out the same ids: only one node may use it.
    v.problem(
      "segment.store",
      v.javaLeafFile
        ? `segment mode is on (${v.named("segment.enabled") ? v.label("segment.enabled") : "leaf.segment.enable defaults to true in Java Leaf"}) but no leaf.jdbc.url is set. ` +
            "Set leaf.jdbc.url, or leaf.segment.enable=false, or segment.store=embedded for one single node (two nodes with their own embedded stores hand out the same ids)"
        : `segment mode would use the embedded store while listening on ${at.host}, reachable from other hosts: ` +
            "set segment.mysql.url (leaf.jdbc.url) for a shared store, or segment.store=embedded to confirm this is the only node serving these tags",
    );
  }
  let mysql: MysqlSettings | undefined;
  if (store === "mysql") {
    const url = v.optional("segment.mysql.url");
    if (url === undefined) {
      if (!v.named("segment.mysql.url")) {
        v.missing("segment.mysql.url", "segment.store is mysql, so the database URL is needed");
      }
    } else {
      mysql = mysqlSettings(
        v,
        url,
        v.optional("segment.mysql.username"),
        v.optional("segment.mysql.password"),
        {
          url: "segment.mysql.url",
          user: "segment.mysql.username",
          password: "segment.mysql.password",
        },
      );
      if (mysql) {
        mysql.table = v.optional("segment.mysql.table");
        mysql.createTable = v.get("segment.mysql.createTable");
      }
    }
  }
  const demoTag = v.get("segment.demoTag");
  return {
    store,
    dir: resolve(at.dataDir, "segments"),
    highWaterDir: resolve(at.dataDir, "segment-high-water"),
    mysql,
    demoTag: demoTag === "" ? null : demoTag,
    refreshIntervalMs: v.get("segment.refreshIntervalMs"),
    exhaustedWaitMs: v.get("segment.exhaustedWaitMs"),
    dynamicStep: v.get("segment.dynamicStep"),
    prefetchMaxDepth: v.get("segment.prefetchMaxDepth"),
    giveBackOnClose: v.get("segment.giveBackOnClose"),
    load: v.get("segment.load"),
    eagerTags: v.get("segment.eagerTags"),
    recentMs: v.get("segment.recentMs"),
  };
}
