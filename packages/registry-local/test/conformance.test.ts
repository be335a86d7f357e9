// The published conformance suite, unchanged, against LocalRegistry. Every registry of a namespace
// shares one folder (the lock and cache files), as processes on one machine share it.
import { mkdtempSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { registryConformance } from "@leaf/conformance/registry";
import { afterAll, test } from "vitest";
import { type LocalLease, LocalRegistry } from "../src/index";

const dir = mkdtempSync(join(tmpdir(), "leaf-local-conformance-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The suite's default nodes are 10.0.0.1:8080, 10.0.0.2:8080, ...: each gets worker id i and two
// backup ids no other node uses.
const workIdMap: Record<string, number[]> = {};
for (let i = 0; i < 20; i++) workIdMap[`10.0.0.${i + 1}:8080`] = [i, 100 + 2 * i, 101 + 2 * i];

registryConformance(test, {
  name: "registry-local",
  create: async () => new LocalRegistry({ workIdMap, dir }),
  backups: true,
  leaseLoss: {
    // Removing the lock file lets another process take the id: the next report must see it.
    induce: async (lease) => unlinkSync((lease as LocalLease).lockFile),
    waitMs: 20_000,
  },
});
