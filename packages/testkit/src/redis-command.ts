// One Redis command from a test, on a connection of its own: for looking at a server's state
// (INFO, a key, Sentinel's view) or steering it (REPLICAOF, SENTINEL FAILOVER) while the code under
// test keeps its own clients.
import { Redis } from "ioredis";
import { LOOPBACK } from "./ports";

/**
 * Runs `command` on the Redis (or Sentinel) at 127.0.0.1:`port` on a short-lived connection and
 * returns its answer; undefined when nothing answers or the command fails.
 */
export async function redisCommand(
  port: number,
  command: string,
  ...args: string[]
): Promise<unknown> {
  const client = new Redis({ port, host: LOOPBACK, lazyConnect: true, retryStrategy: () => null });
  client.on("error", () => {});
  try {
    await client.connect();
    return await client.call(command, ...args);
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
}

/** One field of an INFO section ("" when Redis does not answer or has no such field). */
export async function redisInfoField(
  port: number,
  section: string,
  field: string,
): Promise<string> {
  const text = String((await redisCommand(port, "INFO", section)) ?? "");
  return new RegExp(`^${field}:(.*?)\\r?$`, "m").exec(text)?.[1] ?? "";
}

/** A hash as an object (HGETALL); {} when the key is missing or Redis does not answer. */
export async function redisHash(port: number, key: string): Promise<Record<string, string>> {
  const flat = ((await redisCommand(port, "HGETALL", key)) ?? []) as string[];
  return Object.fromEntries(
    flat.flatMap((value, i) => (i % 2 === 0 ? [[value, flat[i + 1]!]] : [])),
  );
}

/** Redis TIME of the server at `port`, in ms since the Unix epoch. */
export async function redisTimeMs(port: number): Promise<number> {
  const [seconds, micros] = (await redisCommand(port, "TIME")) as [string, string];
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** True when the Redis at `port` replicates from `masterPort` and its link is up. */
export async function redisReplicaInSync(port: number, masterPort: number): Promise<boolean> {
  return (
    (await redisInfoField(port, "replication", "master_port")) === String(masterPort) &&
    (await redisInfoField(port, "replication", "master_link_status")) === "up"
  );
}
