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
