import { defineConfig, mergeConfig } from "vitest/config";
import shared from "../vitest.shared.ts";

// The fault suite and the nemesis each start real clusters: one file at a time on 2 cores.
export default mergeConfig(shared, defineConfig({ test: { fileParallelism: false } }));
