// A full disk under a server on the embedded segment store: its process's file size limit
// (RLIMIT_FSIZE, `prlimit --pid`) set to the journal's size, so that the next append writes a few
// bytes or none and fails (EFBIG; Node ignores SIGXFSZ), as on a full disk; lifted after 3-12 s.
// The store must hand out nothing it could not write: a store that goes on serving the range it
// failed to write hands it out again after a restart (the journal never had it). The limit is the
// process's, so it does not overlap restarts on purpose: a server killed meanwhile comes back
// without it, onto the journal the failed writes left. Small files under the limit (the high-water
// marks, written whole) still work. Root is not needed: the server is this user's process.
import { execFileSync } from "node:child_process";
import { statSync } from "node:fs";
import { join } from "node:path";
import type { Family } from "../families";
import type { Fault } from "./fault";

/**
 * The embedded store's journal in a server's data folder (the server's default `dataDir/segments`).
 */
const JOURNAL = join("segments", "leaf-segments.jsonl");

/** The process each fault limited, so that a server restarted meanwhile is left alone. */
const limited = new Map<string, number>();

/**
 * Servers in segment mode with no link to a store: their ranges come from the embedded store. With
 * several worker processes the primary holds the store and writes its journal (its pid is the
 * server's), and each worker keeps its own high-water marks: a range the primary failed to write
 * and handed out anyway can go, after the primary's restart, to a worker whose marks never saw it.
 */
function embeddedServers(family: Family): string[] {
  return family.servers
    .filter(
      (s) =>
        !s.spare &&
        s.links.length === 0 &&
        family.clients.some((c) => c.mode === "segment" && c.servers.includes(s.label)),
    )
    .map((s) => s.label);
}

function setFileSizeLimit(pid: number, soft: string): void {
  execFileSync("prlimit", ["--pid", String(pid), `--fsize=${soft}:unlimited`], { stdio: "pipe" });
}

export const fullDisk: Fault = {
  name: "full-disk",
  title:
    "the embedded store's disk full: the server's file size limit set to its journal's size (writes fail, EFBIG), lifted after 3-12 s",
  targets: embeddedServers,
  resources: (target) => [`disk:${target}`],
  durationMs: [3000, 12_000],
  async start(c, _family, target) {
    const server = c.server(target);
    if (!server.running) return false;
    let size: number;
    try {
      size = statSync(join(server.dataDir, JOURNAL)).size;
    } catch {
      c.note(`${target} has no journal at ${JOURNAL} yet: no full disk`);
      return false;
    }
    const pid = server.pid;
    setFileSizeLimit(pid, String(size));
    limited.set(target, pid);
    c.note(`${target}'s writes past ${size} bytes fail (its journal's size; pid ${pid})`);
    return true;
  },
  async stop(c, _family, target) {
    const pid = limited.get(target);
    limited.delete(target);
    const server = c.server(target);
    if (pid === undefined || !server.running || server.pid !== pid) return;
    try {
      setFileSizeLimit(pid, "unlimited");
    } catch {
      // The process exited between the check and the call: its successor has no limit.
    }
  },
  effects: (family, target) => ({
    effects: [{ servers: [target], codes: family.storeCodes }],
    settleMs: family.recoveryMs,
  }),
};
