// The shared settings. The monitor page's script is bundled by src/monitor-script.ts at load, with
// the esbuild the build uses.
//
// `pnpm test` runs the server's tests in all four lanes (scripts/test.sh), split by
// LEAF_TEST_SERVER_FILES: "faults" runs the slow fault files below (they mostly wait out leases,
// pauses and restarts), "more" the files of MORE, "extra" those of EXTRA, "rest" every other file.
// Unset, every file runs.
import { defineConfig } from "vitest/config";
import shared from "../../vitest.shared.ts";

const FAULTS = [
  "test/stateful-set.test.ts",
  "test/stateful-set-workers.test.ts",
  "test/workers-faults.test.ts",
  "test/pause-fencing.test.ts",
  "test/high-water-failover.test.ts",
  "test/high-water-seen.test.ts",
];

/** Files that fill the lane of the chaos suite (scripts/test.sh). */
const MORE = ["test/process.test.ts", "test/stop-paused-database.test.ts"];
/** Files that fill the lane of the Redis packages (scripts/test.sh). */
const EXTRA = ["test/pack.test.ts", "test/high-water.test.ts"];

function files(part: string | undefined): { include?: string[]; exclude?: string[] } {
  if (part === undefined || part === "") return {};
  if (part === "faults") return { include: FAULTS };
  if (part === "more") return { include: MORE };
  if (part === "extra") return { include: EXTRA };
  if (part === "rest") return { exclude: [...FAULTS, ...MORE, ...EXTRA, "**/node_modules/**"] };
  throw new Error(
    `LEAF_TEST_SERVER_FILES is ${JSON.stringify(part)}; expected "faults", "more", "extra", "rest" or unset (every file)`,
  );
}

// Spread, not merged: mergeConfig would add FAULTS to the shared include rather than replace it.
export default defineConfig({
  ...shared,
  test: { ...shared.test, ...files(process.env.LEAF_TEST_SERVER_FILES) },
});
