// Private etcd v3 servers (Debian's etcd-server, 3.4): one member on free loopback ports in a temp
// folder. Data survives kill() and stop(), as on a real member; short raft timers allow short
// leases.
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
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
import { freePort, LOOPBACK } from "./ports";
import { exchange } from "./probes";
import { ServerProcess } from "./server-process";
import type { ServiceHandle, StartOptions } from "./types";

/** A one-member etcd v3 cluster (data survives kill() and stop()). */
export interface EtcdHandle extends ServiceHandle {
  readonly kind: "etcd";
  /** The member's name: unique per instance, so the readiness probe knows it is ours. */
  readonly memberName: string | undefined;
}

/** Options of startEtcd(). */
export interface EtcdOptions extends StartOptions {
  /** Path to etcd when it is not in PATH or /usr/bin. */
  etcd?: string;
  /** Raft heartbeat in ms (default 50). */
  heartbeatMs?: number;
  /**
   * Raft election timeout in ms (default 500). etcd's shortest lease TTL is 1.5 × this, rounded up
   * to whole seconds (1 s with the default; 2 s with etcd's own default of 1000 ms).
   */
  electionTimeoutMs?: number;
}

class LocalEtcd extends LocalServer implements EtcdHandle {
  declare readonly kind: "etcd";
  memberName: string | undefined;
}

class ExternalEtcd extends ExternalServer implements EtcdHandle {
  declare readonly kind: "etcd";
  readonly memberName = undefined;
}

/**
 * Starts a private one-member etcd on a free loopback port (about 1 s), or returns the server named
 * by LEAF_TEST_ETCD_URL (http://host:port) when it is set and `useEnv` is not false.
 */
export async function startEtcd(options: EtcdOptions = {}): Promise<EtcdHandle> {
  const setting = options.useEnv === false ? undefined : externalSetting("etcd");
  if (setting !== undefined) return useExternalEtcd(setting);

  const etcd = findProgram("etcd", ["etcd"], options.etcd);
  const dir = await makeInstanceDir("etcd");
  const logFile = join(dir, "etcd.log");
  const dataDir = join(dir, "data");
  const name = `leaf-${randomBytes(6).toString("hex")}`;
  // The peer port is only used by this member; it is chosen before the first start and kept, since
  // the member's data records it.
  let peerPort = 0;
  const server = new ServerProcess({
    kind: "etcd",
    dir,
    logFile,
    async prepare() {
      if (peerPort === 0 || !existsSync(dataDir)) peerPort = await freePort();
    },
    command: (port) => {
      const client = `http://${LOOPBACK}:${port}`;
      const peer = `http://${LOOPBACK}:${peerPort}`;
      return {
        file: etcd,
        // The folder is in the command line, which is how the watchdog finds the process.
        args: [
          "--name",
          name,
          "--data-dir",
          dataDir,
          "--listen-client-urls",
          client,
          "--advertise-client-urls",
          client,
          "--listen-peer-urls",
          peer,
          "--initial-advertise-peer-urls",
          peer,
          "--initial-cluster",
          `${name}=${peer}`,
          "--initial-cluster-state",
          "new",
          "--heartbeat-interval",
          String(options.heartbeatMs ?? 50),
          "--election-timeout",
          String(options.electionTimeoutMs ?? 500),
          "--logger",
          "zap",
          "--log-outputs",
          "stderr",
          "--log-level",
          "warn",
          // Writes reach the OS at once (so they survive kill()) but are not fsynced, as with the
          // test kit's MariaDB, PostgreSQL and ZooKeeper. In a fresh-clone run of 27 Nov, on a busy
          // machine, a release missed its 1 s call deadline (registry-etcd's fault test); etcd's
          // WAL fsync, the only fsync left in the tests, is the likeliest cause.
          "--unsafe-no-fsync",
          ...(options.args ?? []),
        ],
      };
    },
    probe: async (port) => etcdServesAs(LOOPBACK, port, name),
    readyTimeoutMs: options.readyTimeoutMs ?? 30_000,
    stopTimeoutMs: options.stopTimeoutMs ?? 10_000,
  });
  const handle = new LocalEtcd(
    "etcd",
    dir,
    logFile,
    server,
    (port) => `http://${LOOPBACK}:${port}`,
  );
  handle.memberName = name;
  return startOrDispose(handle, server);
}

/** True once etcd on `port` is healthy (it has a leader) and is the member named `name`. */
async function etcdServesAs(host: string, port: number, name: string): Promise<boolean> {
  if (!(await etcdHealthy(host, port))) return false;
  const reply = await exchange(
    host,
    port,
    "POST /v3/cluster/member/list HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}",
    500,
  );
  return reply.includes(`"name":"${name}"`);
}

/** etcd answers GET /health with {"health":"true"} once it has a leader and serves requests. */
async function etcdHealthy(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  const reply = await exchange(host, port, "GET /health HTTP/1.0\r\n\r\n", timeoutMs);
  return /"health":\s*"true"/.test(reply);
}

async function useExternalEtcd(setting: string): Promise<EtcdHandle> {
  const { host, port } = parseServiceUrl("etcd", setting, ["http:"], 2379, "http://host:port");
  const healthy = await etcdHealthy(host, port, 2000).catch((error: Error) => error);
  if (healthy !== true) {
    const reason = healthy instanceof Error ? healthy.message : "GET /health is not healthy";
    throw badEnv("etcd", setting, `no healthy etcd answers at ${host}:${port} (${reason})`);
  }
  return new ExternalEtcd("etcd", host, port, `http://${host}:${port}`);
}
