// The embedded segment store: one file journal in dataDir/segments, for a single node. Java Leaf's
// demo tag is created in it at start. Refused beyond loopback (or with a Java Leaf file) unless
// segment.store=embedded says this node is the only one serving its tags.
import { resolve } from "node:path";
import { ErrorCodes, isLeafError } from "@leaf/core";
import { EmbeddedSegmentStore, type SegmentStore } from "@leaf/segment";
import { def, envName } from "../config-def";
import { tagOrEmpty } from "../config-readers";
import type { ServiceLogger } from "../service-types";
import type { StoreBackend } from "./backend";

export const EMBEDDED_STORE_KEYS = [
  def("segment.demoTag", {
    type: 'tag, or ""',
    default: "leaf-segment-test",
    doc: "Embedded store only: a tag created at start when missing (Java Leaf's demo row: start 1, step 2000); once deleted through the admin API it is not created again (the start logs it).",
    read: tagOrEmpty,
  }),
] as const;

/** The embedded store's settings. */
export interface EmbeddedStoreSettings {
  kind: "embedded";
  /** Its folder: dataDir/segments. */
  dir: string;
  /** Tag created when missing; null for none. */
  demoTag: string | null;
}

export const embeddedStore: StoreBackend<
  "embedded",
  EmbeddedStoreSettings,
  typeof EMBEDDED_STORE_KEYS
> = {
  kind: "embedded",
  keys: EMBEDDED_STORE_KEYS,
  addressKeys: [],
  shared: false,
  fallback: true,
  oneProcess: true,
  settings(v, at, choice) {
    if (!choice.stated && (v.javaLeafFile || !at.loopback)) {
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
    const demoTag = v.get("segment.demoTag");
    return {
      kind: "embedded",
      dir: resolve(at.dataDir, "segments"),
      demoTag: demoTag === "" ? null : demoTag,
    };
  },
  async open(settings, { logger }) {
    const embedded = new EmbeddedSegmentStore({
      dir: settings.dir,
      // A write that could not be stored (disk full, journal replaced): no range is handed out
      // until the journal is verified again; an operator has to look.
      onFailure: (error) =>
        logger.error(
          { err: error, dir: settings.dir },
          "embedded segment store refuses ranges: a journal write failed or the folder is no longer this process's",
        ),
    });
    await embedded.start();
    return embedded;
  },
  async prepare(store, settings, { logger }) {
    if (settings.demoTag === null) return;
    if (!(await store.listTags()).includes(settings.demoTag)) {
      await createDemoTag(store, settings.demoTag, logger);
    }
  },
  storeId: (settings) => `embedded:${settings.dir}`,
  describe: (settings) => ({ kind: "embedded", mode: "", target: settings.dir, shared: false }),
};

/**
 * Creates Java Leaf's demo row (insert into leaf_alloc values('leaf-segment-test', 1, 2000, ...)),
 * unless an operator deleted the tag: the store refuses it below the max id it was deleted with,
 * and a deleted demo tag reads as "not wanted", so it stays deleted and the start goes on.
 */
async function createDemoTag(
  store: SegmentStore,
  tag: string,
  logger: ServiceLogger,
): Promise<void> {
  try {
    await store.createTag({
      tag,
      step: 2000,
      startId: 1n,
      description: "Test leaf Segment Mode Get Id",
    });
    logger.info({ tag }, `created the demo tag ${tag}`);
  } catch (error) {
    const details = (error as { details?: { reason?: unknown; minStartId?: unknown } }).details;
    if (!isLeafError(error, ErrorCodes.ALREADY_EXISTS) || details?.reason !== "deleted")
      throw error;
    logger.warn(
      { tag, minStartId: details.minStartId },
      `the demo tag ${tag} was deleted (max id ${String(details.minStartId)}): not created again. ` +
        `Set segment.demoTag to "" (${envName("segment.demoTag")}="") to silence this, or create the tag ` +
        `with a startId of at least ${String(details.minStartId)}`,
    );
  }
}
