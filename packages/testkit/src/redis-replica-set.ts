// A Redis master and replicas that replicate from it through TCP proxies (their links), for split
// brain tests: cut every link and the master runs on, alone, while a replica is promoted.
import { TestkitError } from "./errors";
import { startRedis } from "./redis";
import { redisCommand, redisInfoField, redisReplicaInSync } from "./redis-command";
import { TcpProxy } from "./tcp-proxy";
import type { RedisHandle } from "./types";
import { waitUntil } from "./wait-until";

/** Options of {@link startRedisReplicaSet}. */
export interface RedisReplicaSetOptions {
  /** How many replicas (default 2: one to promote, one to follow it). */
  replicas?: number;
  /**
   * Arguments for every server, as a deployment configures all nodes alike (for example
   * `--min-replicas-to-write 1 --min-replicas-max-lag 2`).
   */
  args?: string[];
}

/** A master and its replicas; every server is private (LEAF_TEST_REDIS_URL is not used). */
export interface RedisReplicaSet {
  readonly master: RedisHandle;
  readonly replicas: readonly RedisHandle[];
  /** `links[i]` is replica i's way to the master: cut it for a partition. */
  readonly links: readonly TcpProxy[];
  /** Resolves once every replica replicates from the master through its link, link up. */
  waitInSync(timeoutMs?: number): Promise<void>;
  /**
   * A partition between the master and all its replicas: every link is cut both ways, without a
   * close, so the master still lists its replicas and only their lag grows. Resolves once the
   * master has heard no replica for more than `maxLagSeconds` (its `min-replicas-max-lag`).
   */
  isolateMaster(maxLagSeconds: number, timeoutMs?: number): Promise<void>;
  /**
   * Promotes replica `index` as Sentinel would (`REPLICAOF NO ONE`) and points the other replicas
   * at it directly; resolves once they are in sync with it. The old master is left running.
   */
  promote(index: number, timeoutMs?: number): Promise<RedisHandle>;
  /** Closes the links and disposes of every server. */
  dispose(): Promise<void>;
}

/** The lag (seconds since the last ACK) of each replica the master at `port` lists. */
export async function redisReplicaLags(port: number): Promise<number[]> {
  const text = String((await redisCommand(port, "INFO", "replication")) ?? "");
  return [...text.matchAll(/^slave\d+:.*,lag=(\d+)/gm)].map((m) => Number(m[1]));
}

/**
 * How many commands the Redis at `port` answered with the error `code` (INFO errorstats, Redis 6.2
 * and later), for example "NOREPLICAS": 0 when none or when Redis does not answer.
 */
export async function redisErrorCount(port: number, code: string): Promise<number> {
  const field = await redisInfoField(port, "errorstats", `errorstat_${code}`);
  return Number(/count=(\d+)/.exec(field)?.[1] ?? 0);
}

/** Starts a master and `replicas` replicas, each replicating through a TCP proxy of its own. */
export async function startRedisReplicaSet(
  options: RedisReplicaSetOptions = {},
): Promise<RedisReplicaSet> {
  const args = options.args ?? [];
  const count = options.replicas ?? 2;
  const master = await startRedis({ useEnv: false, args });
  const links: TcpProxy[] = [];
  const replicas: RedisHandle[] = [];
  const dispose = async () => {
    await Promise.all(links.map((link) => link.close()));
    await Promise.all([master, ...replicas].map((server) => server.dispose().catch(() => {})));
  };
  try {
    for (let i = 0; i < count; i++) links.push(await TcpProxy.start({ targetPort: master.port }));
    replicas.push(
      ...(await Promise.all(
        links.map((link) =>
          startRedis({
            useEnv: false,
            args: [...args, "--replicaof", "127.0.0.1", String(link.port)],
          }),
        ),
      )),
    );
  } catch (error) {
    await dispose();
    throw error;
  }
  const inSyncWith = async (servers: RedisHandle[], masterPorts: number[]) => {
    for (let i = 0; i < servers.length; i++) {
      if (!(await redisReplicaInSync(servers[i]!.port, masterPorts[i]!))) return false;
    }
    return true;
  };
  return {
    master,
    replicas,
    links,
    dispose,
    async waitInSync(timeoutMs = 60_000) {
      await waitUntil(
        "every replica to be in sync with the master",
        () =>
          inSyncWith(
            replicas,
            links.map((link) => link.port),
          ),
        timeoutMs,
      );
    },
    async isolateMaster(maxLagSeconds, timeoutMs = 60_000) {
      for (const link of links) link.cutOff();
      await waitUntil(
        `the master to have heard no replica for over ${maxLagSeconds} s`,
        async () => {
          const lags = await redisReplicaLags(master.port);
          return lags.length === count && lags.every((lag) => lag > maxLagSeconds);
        },
        timeoutMs,
      );
    },
    async promote(index, timeoutMs = 60_000) {
      const chosen = replicas[index];
      if (chosen === undefined) {
        throw new TestkitError(
          "TESTKIT_BAD_OPTION",
          `promote: replica index ${index} does not exist; expected 0 to ${count - 1}`,
        );
      }
      const answer = await redisCommand(chosen.port, "REPLICAOF", "NO", "ONE");
      if (answer !== "OK") {
        throw new TestkitError(
          "TESTKIT_NOT_RUNNING",
          `promote: REPLICAOF NO ONE on the Redis at port ${chosen.port} answered ` +
            `${String(answer)}, expected OK; is it running?`,
        );
      }
      const others = replicas.filter((r) => r !== chosen);
      for (const other of others) {
        await redisCommand(other.port, "REPLICAOF", "127.0.0.1", String(chosen.port));
      }
      await waitUntil(
        `the other replicas to be in sync with the promoted ${chosen.port}`,
        () =>
          inSyncWith(
            others,
            others.map(() => chosen.port),
          ),
        timeoutMs,
      );
      return chosen;
    },
  };
}
