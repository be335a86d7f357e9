// The start-up check from Meituan's Leaf blog that the open-source Java code lacks: this node's
// clock against the average clock of the other live nodes. Peers' clocks are read from their
// reports: a report's timestamp minus ZooKeeper's modification time of the node is that peer's
// clock offset from the server; this node's offset comes from a node it just wrote. The server's
// own error cancels out, and so does the age of a report (up to the live window).
import { ErrorCodes, LeafError } from "@leaf/core";
import { COMPONENT } from "./options";

/** One peer's last report. */
export interface PeerReport {
  /** Who, for the message. */
  key: string;
  /** The reported timestamp (the peer's clock), ms. */
  timestamp: number;
  /** When ZooKeeper stored it (the server's clock), ms. */
  storedAt: number;
}

/** Inputs of {@link checkPeerClocks}. */
export interface PeerClockInput {
  /** This node's clock (ms), read around `serverNow`. */
  now: number;
  /** ZooKeeper's clock at the same instant (the ctime or mtime of a node just written), ms. */
  serverNow: number;
  peers: readonly PeerReport[];
  maxSkewMs: number;
  liveWindowMs: number;
}

/** What the check found. */
export interface PeerClockResult {
  /** How many live peers were compared. */
  peers: number;
  /** This clock minus the peers' average, ms (0 when there were no peers). */
  skewMs: number;
}

/**
 * Throws CLOCK_SKEW when this clock differs from the average of the live peers' clocks by more
 * than `maxSkewMs`. Peers whose report is older than `liveWindowMs` (server time) are ignored; with
 * none left, the check passes (the first node has nobody to compare with).
 */
export function checkPeerClocks(input: PeerClockInput): PeerClockResult {
  const live = input.peers.filter((p) => input.serverNow - p.storedAt <= input.liveWindowMs);
  if (live.length === 0) return { peers: 0, skewMs: 0 };
  const averageOffset = live.reduce((sum, p) => sum + (p.timestamp - p.storedAt), 0) / live.length;
  const ownOffset = input.now - input.serverNow;
  const skewMs = Math.round(ownOffset - averageOffset);
  if (Math.abs(skewMs) > input.maxSkewMs) {
    const peerNow = Math.round(input.now - skewMs);
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CLOCK_SKEW,
      message:
        `refusing to start: this node's clock (${iso(input.now)}) is ${Math.abs(skewMs)} ms ` +
        `${skewMs > 0 ? "ahead of" : "behind"} the average of ${live.length} live peer(s) ` +
        `(${iso(peerNow)}; ${live.map((p) => p.key).join(", ")}), more than the limit of ` +
        `${input.maxSkewMs} ms. Fix the clock (NTP) on this node or on the peers, or raise ` +
        "peerClockCheck.maxSkewMs",
      details: {
        now: input.now,
        peersAverage: peerNow,
        skewMs,
        maxSkewMs: input.maxSkewMs,
        peers: live.map((p) => p.key),
      },
    });
  }
  return { peers: live.length, skewMs };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
