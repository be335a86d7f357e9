// Vitest settings shared by every package: real servers take a few seconds to start, and fault
// tests wait out leases and timeouts, so the limits are generous; speed is measured in bench/, not
// here.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    pool: "forks",
  },
});
