// The start-up check from Meituan's Leaf blog that the open-source Java code lacks: this node's
// clock against the clocks of the other live nodes (most of them, not their average: below).
// Peers' clocks are read from their reports: a report's timestamp minus ZooKeeper's modification
// time of the node is that peer's clock offset from the server; this node's offset comes from a
// node it just wrote. The server's
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
  /** This clock minus the median of the peers' clocks, ms (0 when there were no peers). */
  skewMs: number;
}

/**
 * Throws CLOCK_SKEW when this clock differs by more than `maxSkewMs` from more than half of the
 * live peers' clocks. Meituan's blog compares with the peers' average, but one peer far off drags
 * an average past every right clock: with a peer an hour ahead, no other node could start or take
 * a lease again after a ZooKeeper outage. Here a node is refused only when most live peers
 * disagree with it, so the node an hour ahead is refused and the others are not; with one live
 * peer, a disagreement refuses (nothing tells which clock is right). Peers whose report is older
 * than `liveWindowMs` (server time) are ignored; with none left, the check passes (the first node
 * has nobody to compare with).
 */
export function checkPeerClocks(input: PeerClockInput): PeerClockResult {
  const live = input.peers.filter((p) => input.serverNow - p.storedAt <= input.liveWindowMs);
  if (live.length === 0) return { peers: 0, skewMs: 0 };
  const ownOffset = input.now - input.serverNow;
  // Each peer's clock minus this one, ms.
  const skews = live.map((p) => ({ key: p.key, ms: p.timestamp - p.storedAt - ownOffset }));
  const apart = skews.filter((s) => Math.abs(s.ms) > input.maxSkewMs);
  const skewMs = Math.round(-median(skews.map((s) => s.ms))) || 0;
  if (apart.length * 2 > live.length) {
    const peerNow = Math.round(input.now - skewMs);
    throw new LeafError({
      component: COMPONENT,
      code: ErrorCodes.CLOCK_SKEW,
      message:
        `refusing to start: this node's clock (${iso(input.now)}) is more than ` +
        `${input.maxSkewMs} ms off ${apart.length} of ${live.length} live peer(s): ` +
        apart
          .map(
            (s) => `${Math.abs(Math.round(s.ms))} ms ${s.ms > 0 ? "behind" : "ahead of"} ${s.key}`,
          )
          .join(", ") +
        ` (the live peers' median clock ${iso(peerNow)}). Fix the clock (NTP) on this node or on ` +
        "the peers, or raise peerClockCheck.maxSkewMs",
      details: {
        now: input.now,
        peersMedian: peerNow,
        skewMs,
        maxSkewMs: input.maxSkewMs,
        peers: live.map((p) => p.key),
        apart: apart.map((s) => s.key),
      },
    });
  }
  return { peers: live.length, skewMs };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
