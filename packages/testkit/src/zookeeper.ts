// Private standalone ZooKeeper servers (Java). A short tickTime lets tests use short session
// timeouts; forceSync=no skips fsync, and a process kill still keeps every acknowledged write.
import { existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { findProgram, requireFiles } from "./binaries";
import {
  badEnv,
  ExternalServer,
  externalSetting,
  LocalServer,
  makeInstanceDir,
  startOrDispose,
} from "./handle";
import { LOOPBACK } from "./ports";
import { zookeeperConf, zookeeperServes } from "./probes";
import { ServerProcess } from "./server-process";
import type { ZookeeperHandle, ZookeeperOptions } from "./types";

const DEBIAN_JAR = "/usr/share/java/zookeeper.jar";
/** Logs to stderr (our log file); Debian's jar lists only slf4j-api, which would log nothing. */
const DEBIAN_LOGGER = "/usr/share/java/slf4j-simple.jar";

class LocalZookeeper extends LocalServer implements ZookeeperHandle {
  declare readonly kind: "zookeeper";

  get connectString(): string {
    return this.url;
  }
}

class ExternalZookeeper extends ExternalServer implements ZookeeperHandle {
  declare readonly kind: "zookeeper";

  get connectString(): string {
    return this.url;
  }
}

/**
 * Jars ZooKeeper 3.8's server needs besides zookeeper.jar. Debian's zookeeper.jar lists them in its
 * manifest (Class-Path) already; naming them again costs nothing and covers a jar without one.
 */
const DEPENDENCIES = [
  "zookeeper-jute",
  "slf4j-api",
  "netty-buffer",
  "netty-codec",
  "netty-common",
  "netty-handler",
  "netty-resolver",
  "netty-transport",
  "netty-transport-native-unix-common",
  "netty-transport-native-epoll",
  "commons-cli",
  "commons-io",
  "jackson-annotations",
  "jackson-core",
  "jackson-databind",
  "metrics-core",
  "snappy-java",
];

/** The classpath for Debian's zookeeper package, with a logger binding that writes to stderr. */
export function debianClasspath(): string {
  requireFiles("zookeeper", [DEBIAN_JAR]);
  const entries = [DEBIAN_JAR];
  for (const name of DEPENDENCIES) {
    const jar = `/usr/share/java/${name}.jar`;
    if (existsSync(jar)) entries.push(jar);
  }
  if (existsSync(DEBIAN_LOGGER)) entries.push(DEBIAN_LOGGER);
  return entries.join(":");
}

/**
 * java and its arguments for a ZooKeeper server in folder `dir` reading `config` (small heap, fast
 * start, logs to stderr).
 */
export function zookeeperCommand(
  java: string,
  classpath: string,
  heapMb: number,
  dir: string,
  config: string,
  extraArgs: readonly string[] = [],
): { file: string; args: string[] } {
  return {
    file: java,
    args: [
      `-Xmx${heapMb}m`,
      "-Xms16m",
      "-XX:+UseSerialGC",
      // Startup speed over peak speed; no hsperfdata files in /tmp.
      "-XX:TieredStopAtLevel=1",
      "-XX:-UsePerfData",
      "-Djava.net.preferIPv4Stack=true",
      `-Djava.io.tmpdir=${dir}`,
      "-Dzookeeper.admin.enableServer=false",
      "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
      "-Dorg.slf4j.simpleLogger.showDateTime=true",
      "-cp",
      classpath,
      ...extraArgs,
      "org.apache.zookeeper.server.quorum.QuorumPeerMain",
      // The config path holds the folder: that is how the watchdog finds the process.
      config,
    ],
  };
}

/**
 * Starts a private standalone ZooKeeper on a free loopback port (about 0.3 s), or returns the
 * server named by LEAF_TEST_ZK (host:port) when it is set and `useEnv` is not false. tickTime
 * defaults to 500 ms, so sessions may be as short as 1 s (minSessionTimeout) and as long as 10 s
 * (maxSessionTimeout); both can be set.
 */
/** What {@link zookeeperServerProcess} needs: the files, the settings of this kind of server. */
export interface ZookeeperProcessSpec {
  dir: string;
  dataDir: string;
  config: string;
  logFile: string;
  /** zoo.cfg lines that differ between a single server and an ensemble member (ticks, quorum). */
  settings: string[];
  command: (port: number) => { file: string; args: string[] };
  readyTimeoutMs: number;
  stopTimeoutMs: number;
}

/**
 * One ZooKeeper server process on a loopback port chosen at start: zoo.cfg is written with the
 * given settings and the settings every test server shares, and it is ready once the server
 * answers `conf` with its own data folder.
 */
export function zookeeperServerProcess(spec: ZookeeperProcessSpec): ServerProcess {
  return new ServerProcess({
    kind: "zookeeper",
    dir: spec.dir,
    logFile: spec.logFile,
    prepare: (port) =>
      writeFile(
        spec.config,
        [
          ...spec.settings,
          `dataDir=${spec.dataDir}`,
          `clientPort=${port}`,
          `clientPortAddress=${LOOPBACK}`,
          "admin.enableServer=false",
          "4lw.commands.whitelist=*",
          "forceSync=no",
          // The default of 60 connections per address is easy to reach from one test process.
          "maxClientCnxns=0",
          "",
        ].join("\n"),
      ),
    command: spec.command,
    probe: async (port) => {
      const conf = await zookeeperConf(LOOPBACK, port);
      return conf?.includes(`dataDir=${spec.dataDir}`) ?? false;
    },
    readyTimeoutMs: spec.readyTimeoutMs,
    stopTimeoutMs: spec.stopTimeoutMs,
  });
}

export async function startZookeeper(options: ZookeeperOptions = {}): Promise<ZookeeperHandle> {
  const setting = options.useEnv === false ? undefined : externalSetting("zookeeper");
  if (setting !== undefined) return useExternalZookeeper(setting);

  const java = findProgram("zookeeper", ["java"], options.java);
  const classpath = options.classpath ?? debianClasspath();
  const tickTime = options.tickTime ?? 500;
  const minSessionTimeout = options.minSessionTimeout ?? 2 * tickTime;
  const maxSessionTimeout = options.maxSessionTimeout ?? 20 * tickTime;
  const heapMb = options.heapMb ?? 256;
  const dir = await makeInstanceDir("zookeeper");
  const dataDir = join(dir, "data");
  const config = join(dir, "zoo.cfg");
  const logFile = join(dir, "zookeeper.log");
  await mkdir(dataDir);

  const server = zookeeperServerProcess({
    dir,
    dataDir,
    config,
    logFile,
    settings: [
      `tickTime=${tickTime}`,
      `minSessionTimeout=${minSessionTimeout}`,
      `maxSessionTimeout=${maxSessionTimeout}`,
    ],
    command: () => zookeeperCommand(java, classpath, heapMb, dir, config, options.args),
    readyTimeoutMs: options.readyTimeoutMs ?? 30_000,
    stopTimeoutMs: options.stopTimeoutMs ?? 10_000,
  });
  const handle = new LocalZookeeper(
    "zookeeper",
    dir,
    logFile,
    server,
    (port) => `${LOOPBACK}:${port}`,
  );
  return startOrDispose(handle, server);
}

async function useExternalZookeeper(setting: string): Promise<ZookeeperHandle> {
  // "host:port[,host:port...][/chroot]": the first server is probed and reported as host/port.
  const first = setting.split("/")[0]!.split(",")[0]!.trim();
  const match = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(first);
  if (!match) throw badEnv("zookeeper", setting, "expected host:port");
  const host = match[1]!.replace(/^\[|\]$/g, "");
  const port = match[2] ? Number(match[2]) : 2181;
  const serves = await zookeeperServes(host, port).catch((error: Error) => error);
  if (serves !== true) {
    const reason =
      serves instanceof Error
        ? serves.message
        : "it did not answer `srvr` (is 4lw.commands.whitelist set to include srvr?)";
    throw badEnv("zookeeper", setting, `no ZooKeeper serves at ${host}:${port} (${reason})`);
  }
  return new ExternalZookeeper("zookeeper", host, port, setting);
}
