// Segment mode's settings: the store (one of backends/index.ts's: chosen by segment.store, else by
// the one whose address is named, else the fallback store) with its own settings, and how ranges
// are loaded and kept.
import { resolve } from "node:path";
import type { Placement } from "./backends/backend";
import { SEGMENT_STORES, storeBackend } from "./backends/index";
import type { SegmentSettings, StoreSettings } from "./config-types";
import type { ConfigValues } from "./config-values";

export type { Placement } from "./backends/backend";

/**
 * The name under which the node keeps its high-water marks for the configured store (see
 * {@link StoreBackend.storeId}); undefined when it keeps none.
 */
export function segmentStoreId(settings: SegmentSettings): string | undefined {
  return storeBackend(settings.store).storeId(settings.backend);
}

/** Segment mode's settings (the mode is enabled); undefined when a problem was noted. */
export function segmentSettings(v: ConfigValues, at: Placement): SegmentSettings | undefined {
  const stated = v.optional("segment.store");
  const addressed = SEGMENT_STORES.filter((store) => store.addressKeys.some((k) => v.named(k)));
  if (stated === undefined && addressed.length > 1) {
    const keys = addressed.flatMap((s) => s.addressKeys.filter((k) => v.named(k)));
    v.problem(
      "segment.store",
      `${keys.map((k) => v.label(k)).join(", ")} name ${addressed.length} segment stores; choose one with ${v.label("segment.store")} and remove the others`,
    );
    return undefined;
  }
  const entry = storeBackend(
    stated ?? addressed[0]?.kind ?? SEGMENT_STORES.find((s) => "fallback" in s && s.fallback)!.kind,
  );
  const backend = entry.settings(v, at, { stated: stated !== undefined }) as
    | StoreSettings
    | undefined;
  if (!backend) return undefined;
  return {
    store: backend.kind,
    backend,
    highWaterDir: resolve(at.dataDir, "segment-high-water"),
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
