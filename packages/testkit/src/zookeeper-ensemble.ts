// A private ZooKeeper ensemble (3 servers by default) whose quorum links can be cut: every server
// reaches every other one, on the peer port (followers to the leader) and on the election port,
// through a TCP proxy of its own for that direction. isolate(i) cuts every link to and from server
// i, a network partition: the connections stay open and carry nothing, so each server notices only
// through its own timeouts (a follower keeps answering reads from its copy until syncLimit ticks
// pass without the leader), while clients keep reaching every server on its client port.
//
// One hole, from ZooKeeper itself: when a server connects to the election port of a server with a
// higher id, the higher one drops that connection and dials back the election address the lower
// one announced, its real port, so such election connections bypass the proxies (seen with `ss`
// on ZooKeeper 3.8). A cut of the peer links is what matters: an isolated follower cannot follow,
// since it reaches the leader's peer port only through a cut proxy; it may still exchange votes.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { findProgram } from "./binaries";
import { TestkitError } from "./errors";
import { LocalServer, makeInstanceDir } from "./handle";
import { freePort, LOOPBACK } from "./ports";
import { exchange } from "./probes";
import type { ServerProcess } from "./server-process";
import { TcpProxy } from "./tcp-proxy";
import type { ZookeeperHandle, ZookeeperOptions } from "./types";
import { debianClasspath, zookeeperCommand, zookeeperServerProcess } from "./zookeeper";

/** Options of {@link startZookeeperEnsemble}. */
export interface ZookeeperEnsembleOptions
  extends Omit<ZookeeperOptions, "useEnv" | "readyTimeoutMs"> {
  /** Servers in the ensemble, 3 to 7 (default 3). */
  size?: number;
  /** Ticks a follower may take to connect and sync to the leader (default 10). */
  initLimit?: number;
  /**
   * Ticks without the leader after which a follower gives up following (and stops serving), and
   * without a follower's answer after which the leader drops it (default 5).
   */
  syncLimit?: number;
  /** ms to wait until every server serves (default 60 000). */
  readyTimeoutMs?: number;
}

/** What a server of the ensemble is doing, from its `srvr` answer. */
export type ZookeeperMemberMode = "leader" | "follower" | "not serving";

/** One server of an ensemble: a ZookeeperHandle whose connectString names this server alone. */
export interface ZookeeperMemberHandle extends ZookeeperHandle {
  /** The server's id (myid), 1-based: member i of `members` has id i + 1. */
  readonly id: number;
  /** Leader or follower, or "not serving" (out of the quorum, stopped, paused). */
  mode(): Promise<ZookeeperMemberMode>;
}

/** A running ensemble. */
export interface ZookeeperEnsembleHandle {
  readonly members: readonly ZookeeperMemberHandle[];
  /** Every server: "127.0.0.1:P1,127.0.0.1:P2,...". */
  readonly connectString: string;
  /** The servers at these indexes of `members` only, for a client that must use only them. */
  connectStringOf(indexes: readonly number[]): string;
  /**
   * Index in `members` of the leader; waits (up to `timeoutMs`, default 30 000) until there is one.
   */
  leader(timeoutMs?: number): Promise<number>;
  /**
   * Cuts every quorum link (peer and election ports, both directions) between member `index` and
   * the others, except election connections ZooKeeper dialed back directly (see the file header).
   * Clients still reach every server.
   */
  isolate(index: number): void;
  /** Ends every cut: the cut connections are reset, the servers reconnect on their own. */
  heal(): void;
  /**
   * Waits until every running member serves again (the isolated one rejoined) under one leader
   * (default 60 000 ms).
   */
  waitUntilServing(timeoutMs?: number): Promise<void>;
  /** Kills every server, closes the proxies, removes the folders. */
  dispose(): Promise<void>;
}

class Member extends LocalServer implements ZookeeperMemberHandle {
  declare readonly kind: "zookeeper";

  constructor(
    readonly id: number,
    dir: string,
    logFile: string,
    server: ServerProcess,
  ) {
    super("zookeeper", dir, logFile, server, (port) => `${LOOPBACK}:${port}`);
  }

  get connectString(): string {
    return this.url;
  }

  /** First start, on a free client port. */
  startOnFreePort(): Promise<void> {
    return this.server.startOnFreePort();
  }

  async mode(): Promise<ZookeeperMemberMode> {
    if (!this.running) return "not serving";
    const reply = await exchange(LOOPBACK, this.port, "srvr", 1_000).catch(() => "");
    const match = /Mode: (\w+)/.exec(reply);
    if (match?.[1] === "leader") return "leader";
    if (match?.[1] === "follower") return "follower";
    return "not serving";
  }
}

/** Quorum and election ports of one server. */
interface QuorumPorts {
  peer: number;
  election: number;
}

/** The two proxies of one direction of one link. */
interface LinkProxies {
  from: number;
  to: number;
  peer: TcpProxy;
  election: TcpProxy;
}

class Ensemble implements ZookeeperEnsembleHandle {
  constructor(
    readonly members: readonly Member[],
    private readonly links: readonly LinkProxies[],
  ) {}

  get connectString(): string {
    return this.members.map((m) => m.connectString).join(",");
  }

  connectStringOf(indexes: readonly number[]): string {
    return indexes.map((i) => this.member(i).connectString).join(",");
  }

  async leader(timeoutMs = 30_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const modes = await Promise.all(this.members.map((m) => m.mode()));
      const index = modes.indexOf("leader");
      if (index >= 0) return index;
      if (Date.now() > deadline) {
        throw new TestkitError(
          "TESTKIT_NOT_RUNNING",
          `no ZooKeeper server of the ensemble leads after ${timeoutMs} ms (modes: ${modes.join(", ")}); see the logs in ${this.members.map((m) => m.logFile).join(", ")}`,
        );
      }
      await sleep(50);
    }
  }

  isolate(index: number): void {
    this.member(index);
    for (const link of this.links) {
      if (link.from === index || link.to === index) {
        link.peer.cutOff();
        link.election.cutOff();
      }
    }
  }

  heal(): void {
    for (const link of this.links) {
      link.peer.heal();
      link.election.heal();
    }
  }

  async waitUntilServing(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const running = this.members.filter((m) => m.running);
      const modes = await Promise.all(running.map((m) => m.mode()));
      if (!modes.includes("not serving") && modes.filter((m) => m === "leader").length === 1) {
        return;
      }
      if (Date.now() > deadline) {
        throw new TestkitError(
          "TESTKIT_NOT_RUNNING",
          `the ZooKeeper ensemble does not serve after ${timeoutMs} ms (modes: ${modes.join(", ")}); see the logs in ${running.map((m) => m.logFile).join(", ")}`,
        );
      }
      await sleep(50);
    }
  }

  async dispose(): Promise<void> {
    const results = await Promise.allSettled([
      ...this.members.map((m) => m.dispose()),
      ...this.links.flatMap((l) => [l.peer.close(), l.election.close()]),
    ]);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
  }

  private member(index: number): Member {
    const member = this.members[index];
    if (!member) {
      throw new TestkitError(
        "TESTKIT_BAD_OPTION",
        `no member ${index} in a ZooKeeper ensemble of ${this.members.length} (indexes 0..${this.members.length - 1})`,
      );
    }
    return member;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Starts a private ZooKeeper ensemble on free loopback ports, every quorum link through its own
 * TCP proxy (see {@link ZookeeperEnsembleHandle.isolate}). Resolves once every server serves.
 * tickTime defaults to 500 ms (sessions from 1 s to 10 s, as startZookeeper). Never uses an
 * external server: an ensemble is for breaking.
 */
export async function startZookeeperEnsemble(
  options: ZookeeperEnsembleOptions = {},
): Promise<ZookeeperEnsembleHandle> {
  const size = options.size ?? 3;
  if (!Number.isInteger(size) || size < 3 || size > 7) {
    throw new TestkitError(
      "TESTKIT_BAD_OPTION",
      `startZookeeperEnsemble: size ${String(size)} is not allowed; expected an integer from 3 to 7`,
    );
  }
  const java = findProgram("zookeeper", ["java"], options.java);
  const classpath = options.classpath ?? debianClasspath();
  const tickTime = options.tickTime ?? 500;
  const minSessionTimeout = options.minSessionTimeout ?? 2 * tickTime;
  const maxSessionTimeout = options.maxSessionTimeout ?? 20 * tickTime;
  const heapMb = options.heapMb ?? 128;

  const quorum: QuorumPorts[] = [];
  for (let i = 0; i < size; i++)
    quorum.push({ peer: await freePort(), election: await freePort() });
  const links: LinkProxies[] = [];
  const members: Member[] = [];
  try {
    for (let from = 0; from < size; from++) {
      for (let to = 0; to < size; to++) {
        if (from === to) continue;
        links.push({
          from,
          to,
          peer: await TcpProxy.start({ targetPort: quorum[to]!.peer }),
          election: await TcpProxy.start({ targetPort: quorum[to]!.election }),
        });
      }
    }
    for (let i = 0; i < size; i++) {
      const dir = await makeInstanceDir("zookeeper");
      const dataDir = join(dir, "data");
      const config = join(dir, "zoo.cfg");
      const logFile = join(dir, "zookeeper.log");
      await mkdir(dataDir);
      await writeFile(join(dataDir, "myid"), `${i + 1}\n`);
      const servers = quorum.map((ports, j) => {
        if (j === i) return `server.${j + 1}=${LOOPBACK}:${ports.peer}:${ports.election}`;
        const link = links.find((l) => l.from === i && l.to === j)!;
        return `server.${j + 1}=${LOOPBACK}:${link.peer.port}:${link.election.port}`;
      });
      const server = zookeeperServerProcess({
        dir,
        dataDir,
        config,
        logFile,
        settings: [
          `tickTime=${tickTime}`,
          `initLimit=${options.initLimit ?? 10}`,
          `syncLimit=${options.syncLimit ?? 5}`,
          `minSessionTimeout=${minSessionTimeout}`,
          `maxSessionTimeout=${maxSessionTimeout}`,
          ...servers,
        ],
        command: () => zookeeperCommand(java, classpath, heapMb, dir, config, options.args),
        readyTimeoutMs: options.readyTimeoutMs ?? 60_000,
        stopTimeoutMs: options.stopTimeoutMs ?? 10_000,
      });
      members.push(new Member(i + 1, dir, logFile, server));
    }
    // A server serves only once a quorum formed: all start together.
    await Promise.all(members.map((m) => m.startOnFreePort()));
  } catch (error) {
    await Promise.allSettled([
      ...members.map((m) => m.dispose()),
      ...links.flatMap((l) => [l.peer.close(), l.election.close()]),
    ]);
    throw error;
  }
  return new Ensemble(members, links);
}
