// A second process with a running node's identity on ZooKeeper's normal mode (registry-zk README,
// "When the session is lost"): the spare S is started again and again, for 8-15 s, as the
// holder's `ip:port` (127.0.0.1 and the holder's port, through LEAF_SNOWFLAKE_PORT), on the same
// machine, so it shares the holder's cache file `{tmpdir}/nem/registry-zk/{port}/workerID.json`.
// The README promises such a start is refused (WORKER_ID_IN_USE) while the holder holds its
// marker; also when ZooKeeper stops answering the start while it waits for that marker to go: it
// has seen a live holder, so it does not start from the cache file. Variants:
//  - "refused": nothing else; each start waits the marker's session timeout + 1 s and is refused.
//  - "wait-cut": each start's link to ZooKeeper is cut 0.2-1.5 s after it read the holder's marker
//    (its getData of the marker, read from its TcpProxy's traffic: by then it has met the
//    marker held, and waits up to 5 s for it to go), and healed once the start was refused (a
//    start that got through keeps it cut until the fault ends, and issues meanwhile). A cut before
//    it met the marker would be a start that cannot reach ZooKeeper, which starts from the cache
//    file by design (the README's "not guaranteed"): the reader keeps the cut after the read.
// S runs on the holder's clock (one machine). A start that succeeds issues ids under the holder's
// worker id while the holder issues: S's clients record them, and the checker finds the
// duplicates or the worker-id overlap. A holder whose session ended (a cut or a ZooKeeper outage
// past its 4 s session) has no marker until it takes it again, and a second process may then take
// it: the default's documented window, not what this fault tests. So the holder's link, ZooKeeper
// itself and the holder's process are held too, and each start waits until the holder's marker is
// held by a session connected to ZooKeeper (its `dump` and `cons`). A holder paused past its
// session is not drawn; a holder partitioned past it is `session-lost-identity`'s, on the strict
// family (stopWithoutSession) only, which reuses the helpers exported here.
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exchange } from "@leaf/testkit";
import { idsFrom } from "../checker";
import { type Cluster, sleep } from "../cluster";
import { type Family, NAME } from "../families";
import { readZkRequests, ZK_OP } from "../zk-requests";
import { type Fault, mainServers, NO_ANSWER, processOf } from "./fault";

export const SAME_IDENTITY_VARIANTS = ["refused", "wait-cut"] as const;
type Variant = (typeof SAME_IDENTITY_VARIANTS)[number];

/** ms between two start attempts of S. */
export const RETRY_MS = 300;
/** The cut of "wait-cut": this long (ms, drawn per attempt) after S read the holder's marker. */
const CUT_AFTER_READ_MS = [200, 1500] as const;
/** Most ms the fault waits at its start for the holder's marker to be held by a connected session. */
const ATTACH_WAIT_MS = 3000;

/** The spare of kind "same-identity" in `family`, if it has one. */
export function spareOf(family: Family): string | undefined {
  return family.servers.find((s) => s.spare === "same-identity")?.label;
}

/** The spare of kind "same-identity" in `family`, or an error naming the family. */
export function spareIn(family: Family): string {
  const spare = spareOf(family);
  if (!spare) throw new Error(`[leaf] [nemesis] ${family.name} has no same-identity spare`);
  return spare;
}

/** The holder's marker in ZooKeeper's normal-mode tree. */
function markerPath(port: number): string {
  return `/snowflake/${NAME}/temporary/127.0.0.1:${port}`;
}

/** The registry's default cache file of the node 127.0.0.1:`port` (shared by S and the holder). */
export function cacheFile(port: number): string {
  return join(tmpdir(), NAME, "registry-zk", String(port), "workerID.json");
}

/** ZooKeeper's answer to a four-letter command; undefined when it does not answer in 2 s. */
function fourLetter(port: number, command: string): Promise<string | undefined> {
  return exchange("127.0.0.1", port, command).catch(() => undefined);
}

/**
 * The session that holds `marker`, from ZooKeeper's `dump` (sessions and their ephemeral nodes):
 * "gone" when the dump lists no such node (its session expired or it was deleted), undefined when
 * ZooKeeper did not answer.
 */
export async function markerOwner(
  port: number,
  marker: string,
): Promise<bigint | "gone" | undefined> {
  const dump = await fourLetter(port, "dump");
  if (dump === undefined) return undefined;
  let session: bigint | undefined;
  for (const line of dump.split("\n")) {
    const text = line.trim();
    const header = /^(0x[0-9a-f]+):$/i.exec(text);
    if (header) session = BigInt(header[1]!);
    else if (text === marker && session !== undefined) return session;
  }
  return "gone";
}

/**
 * The session that holds `marker`, when it is connected to ZooKeeper now: the owner from `dump`,
 * found among the connections of `cons`. Undefined when the marker is gone or its session is not
 * attached (a holder whose session a ZooKeeper outage or a cut ended, before it took its marker
 * again): a second process could then take the marker, the README's documented window, not what
 * this fault tests.
 */
async function attachedOwner(port: number, marker: string): Promise<string | undefined> {
  const owner = await markerOwner(port, marker);
  if (typeof owner !== "bigint") return undefined;
  const cons = (await fourLetter(port, "cons")) ?? "";
  const attached = [...cons.matchAll(/sid=(0x[0-9a-f]+)/gi)].some((m) => BigInt(m[1]!) === owner);
  return attached ? `0x${owner.toString(16)}` : undefined;
}

/** Polls {@link attachedOwner} every 250 ms for up to `ms` (or until `stop()`). */
async function waitAttached(
  port: number,
  marker: string,
  ms: number,
  stop: () => boolean = () => false,
): Promise<string | undefined> {
  const end = performance.now() + ms;
  for (;;) {
    const owner = await attachedOwner(port, marker);
    if (owner !== undefined || stop() || performance.now() >= end) return owner;
    await sleep(250);
  }
}

interface Run {
  stopping: boolean;
  loop: Promise<void>;
  fromMs: number;
  refused: number;
  /** Refused after a cut in its wait ("wait-cut"). */
  refusedAfterCut: number;
  /** Killed at the fault's end, still starting. */
  cutShort: number;
  /** Ended otherwise (no WORKER_ID_IN_USE in its output). */
  other: number;
  /** S's incarnation if a start succeeded. */
  started: number | undefined;
}

const runs = new Map<string, Run>();

/**
 * The holder's node (its port, marker path, ZooKeeper's port) and the session holding its marker,
 * once that session is connected to ZooKeeper (waited for up to ATTACH_WAIT_MS: after a ZooKeeper
 * outage or a cut the holder may still be taking its marker again). Undefined, with a note naming
 * `what` is not done, when it is not.
 */
export async function attachedHolder(
  c: Cluster,
  holder: string,
  what: string,
): Promise<{ port: number; marker: string; zkPort: number; owner: string } | undefined> {
  const port = c.server(holder).port;
  const marker = markerPath(port);
  const zkPort = c.store("zookeeper").port;
  const owner = await waitAttached(zkPort, marker, ATTACH_WAIT_MS);
  if (owner === undefined) {
    c.note(
      `${holder}'s marker ${marker} is not held by a session connected to ZooKeeper: no ${what}`,
    );
    return undefined;
  }
  return { port, marker, zkPort, owner };
}

async function start(c: Cluster, family: Family, holder: string, variant: Variant) {
  const spare = spareIn(family);
  const holderServer = c.server(holder);
  const spareServer = c.server(spare);
  if (!holderServer.running || spareServer.running) return false;
  const attached = await attachedHolder(c, holder, "same-identity start");
  if (!attached) return false;
  const { port, marker, zkPort, owner } = attached;
  let cached = "no cache file yet";
  try {
    const json = JSON.parse(readFileSync(cacheFile(port), "utf8")) as { workerId?: number };
    cached = `worker id ${json.workerId}`;
  } catch {
    // Not written yet: S has nothing to start from, with or without the fix.
  }
  const link = c.proxy(spare, "zookeeper");
  const env = c.envs.get(spare)!;
  env.LEAF_SNOWFLAKE_PORT = String(port);
  c.note(
    `${spare} starts as ${holder}'s identity 127.0.0.1:${port} (${variant}); its marker held by session ${owner}; the shared cache file ${cacheFile(port)}: ${cached}`,
  );
  const run: Run = {
    stopping: false,
    loop: Promise.resolve(),
    fromMs: c.history.now(),
    refused: 0,
    refusedAfterCut: 0,
    cutShort: 0,
    other: 0,
    started: undefined,
  };
  run.loop = (async () => {
    while (!run.stopping) {
      if ((await attachedOwner(zkPort, marker)) === undefined) {
        const again = await waitAttached(zkPort, marker, Infinity, () => run.stopping);
        c.note(
          `${spare} waited for ${holder}'s marker to be held by a connected session again${again ? ` (${again})` : ": the fault ended first"}`,
        );
        if (again === undefined) return;
      }
      // One machine, one wall clock: S runs on the holder's clock.
      c.clocks.get(spare)!.set(c.clocks.get(holder)!.offsetMs);
      let cutAt: number | undefined;
      let readAt: number | undefined;
      let timer: NodeJS.Timeout | undefined;
      const launchedAt = performance.now();
      let stopReading = () => {};
      if (variant === "wait-cut") {
        stopReading = readZkRequests(link, (type, path) => {
          if (type !== ZK_OP.getData || path !== marker || readAt !== undefined) return;
          readAt = performance.now();
          const [lo, hi] = CUT_AFTER_READ_MS;
          timer = setTimeout(
            () => {
              if (run.stopping) return;
              link.cutOff();
              cutAt = performance.now();
            },
            lo + Math.random() * (hi - lo),
          );
        });
      }
      const outcome = await spareServer.tryStart();
      clearTimeout(timer);
      stopReading();
      // A start that got through keeps its link cut until the fault ends: it runs as a process
      // partitioned from ZooKeeper, issuing under the holder's worker id (the bug made visible).
      if (cutAt !== undefined && !outcome.started) link.heal();
      const cut =
        cutAt === undefined
          ? ""
          : `, its link cut ${Math.round(cutAt - readAt!)} ms after it read ${holder}'s marker (${Math.round(cutAt - launchedAt)} ms after launch)`;
      if (outcome.started) {
        run.started = spareServer.incarnation;
        c.note(
          `${spare} STARTED as ${holder}'s identity 127.0.0.1:${port} (#${spareServer.incarnation}${cut}${cutAt === undefined ? "" : "; the link stays cut until the fault ends"}) after ${run.refused} refused starts`,
        );
        return;
      }
      if (run.stopping && outcome.signal === "SIGKILL") {
        run.cutShort++;
        c.note(`${spare}'s start #${spareServer.incarnation} killed at the fault's end${cut}`);
        return;
      }
      const code = /WORKER_ID_IN_USE[^\n]{0,400}/.exec(outcome.output)?.[0];
      if (code) {
        run.refused++;
        if (cutAt !== undefined) run.refusedAfterCut++;
      } else run.other++;
      const why = code ?? /[A-Z_]{6,}[^\n]{0,200}/.exec(outcome.output)?.[0] ?? "no reason printed";
      c.note(
        `${spare} refused (#${spareServer.incarnation}, exit ${outcome.code}${cut}${variant === "wait-cut" && readAt === undefined ? ", never read the marker" : ""}): ${why}`,
      );
      if (!run.stopping) await sleep(RETRY_MS);
    }
  })();
  runs.set(spare, run);
  return true;
}

async function stop(c: Cluster, family: Family, holder: string): Promise<void> {
  const spare = spareIn(family);
  const spareServer = c.server(spare);
  const run = runs.get(spare);
  runs.delete(spare);
  if (run) run.stopping = true;
  if (spareServer.running) await spareServer.kill();
  await run?.loop;
  const link = c.proxy(spare, "zookeeper");
  if (link.isCut) link.heal();
  const env = c.envs.get(spare)!;
  delete env.LEAF_SNOWFLAKE_PORT;
  c.clocks.get(spare)!.set(0);
  if (!run) return;
  const issued = idsFrom(c.history, spare, run.fromMs, c.history.now());
  c.note(
    `same-identity ${holder}: ${spare} refused ${run.refused} times (WORKER_ID_IN_USE${run.refusedAfterCut > 0 ? `, ${run.refusedAfterCut} after a cut in its wait` : ""}), ${run.cutShort} start killed at the end, ${run.other} other ends; ${run.started === undefined ? "never started" : `STARTED (#${run.started}) and issued ${issued} ids`}`,
  );
}

/** What a second process as `target`'s identity holds: both processes, both links, ZooKeeper. */
export function identityResources(target: string, family: Family): string[] {
  const spare = spareIn(family);
  return [
    processOf(target),
    `link:${target}~zookeeper`,
    "store:zookeeper",
    processOf(spare),
    `link:${spare}~zookeeper`,
  ];
}

export const sameIdentity: Fault = {
  name: "same-identity",
  title:
    "a second process as a running server's ip:port (ZooKeeper normal mode, one cache file) started again and again, 8-15 s; variant wait-cut: its link cut while it waits for the holder's marker",
  targets: (family) => (spareOf(family) ? mainServers(family) : []),
  resources: identityResources,
  durationMs: [8000, 15_000],
  params: (rng) => ({ variant: rng.pick(SAME_IDENTITY_VARIANTS) }),
  start: (c, family, target, params) => start(c, family, target, params.variant as Variant),
  stop: (c, family, target) => stop(c, family, target),
  // S is refused (its clients find nothing listening); nothing on the holder.
  effects: (family) => ({
    effects: [{ servers: [spareIn(family)], codes: NO_ANSWER }],
    settleMs: 1000,
  }),
};
