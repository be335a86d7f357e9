// Private Redis servers: no persistence, so a killed or restarted server comes back empty, which is
// what the redis-sequence fault tests rely on.
import { join } from "node:path";
import { findProgram } from "./binaries";
import {
  badEnv,
  ExternalServer,
  externalSetting,
  LocalServer,
  makeInstanceDir,
  parseServiceUrl,
  startOrDispose,
} from "./handle";
import { LOOPBACK } from "./ports";
import { redisAnswers, redisPid } from "./probes";
import { ServerProcess } from "./server-process";
import type { RedisHandle, RedisOptions } from "./types";

class LocalRedis extends LocalServer implements RedisHandle {
  declare readonly kind: "redis";
}

class ExternalRedis extends ExternalServer implements RedisHandle {
  declare readonly kind: "redis";
}

/**
 * Starts a private Redis on a free loopback port (about 30 ms), or returns the server named by
 * LEAF_TEST_REDIS_URL (redis://host:port) when it is set and `useEnv` is not false.
 */
export async function startRedis(options: RedisOptions = {}): Promise<RedisHandle> {
  const setting = options.useEnv === false ? undefined : externalSetting("redis");
  if (setting !== undefined) return useExternalRedis(setting);

  const redisServer = findProgram("redis", ["redis-server"], options.redisServer);
  const dir = await makeInstanceDir("redis");
  const logFile = join(dir, "redis.log");
  const server = new ServerProcess({
    kind: "redis",
    dir,
    logFile,
    command: (port) => ({
      file: redisServer,
      // The folder is in the command line, which is how the watchdog finds the process.
      args: [
        "--port",
        String(port),
        "--bind",
        LOOPBACK,
        "--dir",
        dir,
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--logfile",
        "",
        ...(options.args ?? []),
      ],
    }),
    probe: async (port, pid) => (await redisPid(LOOPBACK, port)) === pid,
    readyTimeoutMs: options.readyTimeoutMs ?? 30_000,
    stopTimeoutMs: options.stopTimeoutMs ?? 10_000,
  });
  const handle = new LocalRedis(
    "redis",
    dir,
    logFile,
    server,
    (port) => `redis://${LOOPBACK}:${port}`,
  );
  return startOrDispose(handle, server);
}

async function useExternalRedis(setting: string): Promise<RedisHandle> {
  const { host, port } = parseServiceUrl(
    "redis",
    setting,
    ["redis:", "rediss:"],
    6379,
    "redis://host:port",
  );
  const answers = await redisAnswers(host, port).catch((error: Error) => error);
  if (answers !== true) {
    const reason = answers instanceof Error ? answers.message : "it does not speak Redis";
    throw badEnv("redis", setting, `no Redis answers at ${host}:${port} (${reason})`);
  }
  return new ExternalRedis("redis", host, port, setting);
}
