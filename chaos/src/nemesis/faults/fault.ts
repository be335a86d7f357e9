// The shape of a fault in the catalogue: what it can hit in a family, what it holds while active
// (two faults holding one resource never overlap), how long it lasts, how it starts and stops, and
// which error codes it may cause on which servers, and for how long after it stops.
import type { Cluster, StoreKind } from "../cluster";
import type { Family } from "../families";
import type { Prng } from "../prng";

/** Codes a fault may cause on some servers. */
export interface Effect {
  /** Server labels; "*" for every server of the family. */
  servers: string[];
  codes: string[];
  /**
   * The database of a residue set this effect takes away from `servers`: one down costs no request
   * while another answers (segment and server READMEs), so the codes are accepted only while the
   * effects active for the answering server take away every database of `of`.
   */
  outage?: { database: string; of: string[] };
}

/** What a fault may cause. */
export interface Effects {
  effects: Effect[];
  /** ms after it stops during which its codes are still accepted (recovery). */
  settleMs: number;
  /** The fault leaves a lasting change (a clock stepped forward): its codes stay accepted. */
  lasting?: boolean;
}

/** Parameters drawn for one occurrence (offsets, variants). */
export type Params = Record<string, number | string>;

/** One kind of fault. */
export interface Fault {
  name: string;
  /** What it does, for the README and the report. */
  title: string;
  /** What it can hit in `family` ("A", "A~mysql", "mysql", "nem"); none when it does not apply. */
  targets(family: Family): string[];
  /** Resources it holds while active, for `target`. */
  resources(target: string, family: Family): string[];
  /** Shortest and longest duration in ms. */
  durationMs: [number, number];
  /** Draws its parameters (default none). */
  params?(rng: Prng): Params;
  /** Starts the fault. Returns false when it could not be applied (the server is not running). */
  start(c: Cluster, family: Family, target: string, params: Params): Promise<boolean>;
  /** Undoes it (restart, resume, heal). */
  stop(c: Cluster, family: Family, target: string, params: Params): Promise<void>;
  /** The codes it may cause. */
  effects(family: Family, target: string, params: Params): Effects;
}

/** Codes a client sees when a server does not answer: refused, reset, timed out. */
export const NO_ANSWER = [
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "TIMEOUT",
  "REQUEST_ERROR",
  "RESPONSE_ERROR",
];

/** Labels of the servers a family starts with (not the spares). */
export function mainServers(family: Family): string[] {
  return family.servers.filter((s) => !s.spare).map((s) => s.label);
}

/**
 * ms under the registry's limit at which two clocks count as apart: a peer's clock is read from its
 * report and ZooKeeper's modification time, a few ms off the fake clock's offset.
 */
const PEER_SKEW_MARGIN_MS = 500;

/**
 * On a family whose registry checks a server's clock against its live peers' (`peerClockSkewMs`):
 * when the main servers' clocks are now further apart than the limit, every server may be refused
 * a start or a lost lease's re-acquire (CLOCK_SKEW), and answers LEASE_LOST until it holds one
 * again, not only the server whose clock was stepped. A peer an hour ahead is further than the
 * limit from every other server (the 60-minute run of 28 Nov, seed 2816: C lost its session while
 * ZooKeeper was killed, and its re-acquire was refused for 36 s against A, an hour ahead, and B,
 * 13.8 s ahead after three small steps). Checked when a fault that sets a clock has started (run.ts).
 */
export function peerSkewEffects(
  clocks: ReadonlyMap<string, { offsetMs: number }>,
  family: Family,
): Effect[] {
  const limit = family.peerClockSkewMs;
  if (limit === undefined) return [];
  const offsets = mainServers(family).map((label) => clocks.get(label)?.offsetMs ?? 0);
  const spread = Math.max(...offsets) - Math.min(...offsets);
  return spread > limit - PEER_SKEW_MARGIN_MS
    ? [{ servers: ["*"], codes: ["CLOCK_SKEW", "LEASE_LOST"] }]
    : [];
}

/** The resource of a server process (pause, kill, stop are exclusive). */
export const processOf = (label: string) => `process:${label}`;

/**
 * The family's store codes on `servers` while `store` fails; for a database of a residue set, only
 * while every database of the set fails for that server (see {@link Effect.outage}).
 */
export function storeEffect(family: Family, servers: string[], store: string): Effect {
  const members = family.residue;
  if (!members?.includes(store as StoreKind)) return { servers, codes: family.storeCodes };
  return { servers, codes: family.storeCodes, outage: { database: store, of: [...members] } };
}
