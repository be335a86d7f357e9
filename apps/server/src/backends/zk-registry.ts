// The ZooKeeper registry: Java Leaf's tree /snowflake/{name}/forever (normal mode: a fixed worker
// id per ip:port, readable by Java Leaf), or recycled ids (recycle mode, the fork's zk_recycle).
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LeafError, NodeIdentity } from "@leaf/core";
import { checkJavaLeafName } from "@leaf/registry-zk";
import { def } from "../config-def";
import { boolean, Expected, integer, oneOf, text } from "../config-readers";
import { workerSuffix } from "../worker-identity";
import type { RegistryBackend } from "./backend";

/** Reads ZooKeeper servers: host:port[,host:port...][/chroot]. */
export function zkAddress(raw: unknown): string {
  const t = text(raw);
  const m = t === undefined ? null : /^([^/\s]+)(\/[^\s]*)?$/.exec(t);
  const serversOk =
    m !== null &&
    m[1]!.split(",").every((part) => {
      const hp = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(part.trim());
      return hp !== null && Number(hp[2]) >= 1 && Number(hp[2]) <= 65535;
    });
  if (!t || !serversOk) {
    throw new Expected(
      'ZooKeeper servers "host:port[,host:port...][/chroot]", e.g. 127.0.0.1:2181',
    );
  }
  return t;
}

export const ZK_REGISTRY_KEYS = [
  def("snowflake.zk.address", {
    aliases: ["leaf.snowflake.zk.address"],
    type: "host:port[,host:port][/chroot]",
    defaultText: "(none)",
    doc: "ZooKeeper servers (Java Leaf's tree `/snowflake/{name}/forever`).",
    read: zkAddress,
  }),
  def("snowflake.zk.mode", {
    type: "normal | recycle",
    default: "normal",
    doc: "normal: Java Leaf's fixed worker id per ip:port; recycle: ids freed when their holder is gone.",
    read: oneOf(["normal", "recycle"] as const),
  }),
  def("snowflake.zk.sessionTimeoutMs", {
    type: "1,000 to 600,000",
    default: 6000,
    doc: "ZooKeeper session timeout.",
    read: integer(1000, 600_000),
  }),
  def("snowflake.zk.stopWithoutSession", {
    type: "boolean",
    default: false,
    doc: "ZooKeeper normal mode: stop issuing ids while the ZooKeeper session is not proven alive (no ids during an outage longer than 2/3 of the session timeout). false, as Java Leaf: ids keep flowing, and a second process with the same ip:port started while this one is cut off or paused past its session can repeat ids until this one reconnects (see registry-zk's README).",
    read: boolean,
  }),
] as const;

/** The ZooKeeper registry's settings. */
export interface ZkRegistrySettings {
  kind: "zk";
  address: string;
  mode: "normal" | "recycle";
  sessionTimeoutMs: number;
  stopWithoutSession: boolean;
}

/** The fork's leaf.snowflake.mode values, and the mode each picks. */
const VARIANTS = { zk_normal: "normal", zk_recycle: "recycle" } as const;

export const zkRegistry: RegistryBackend<"zk", ZkRegistrySettings, typeof ZK_REGISTRY_KEYS> = {
  kind: "zk",
  keys: ZK_REGISTRY_KEYS,
  addressKeys: ["snowflake.zk.address"],
  shared: true,
  variants: Object.keys(VARIANTS),
  settings(v, { chosen }) {
    const address = v.optional("snowflake.zk.address");
    if (address === undefined) {
      if (!v.named("snowflake.zk.address")) {
        v.missing(
          "snowflake.zk.address",
          "the snowflake registry is zk, so ZooKeeper's address is needed",
        );
      }
      return undefined;
    }
    const variant = chosen?.variant as keyof typeof VARIANTS | undefined;
    const mode =
      v.optional("snowflake.zk.mode") ??
      (variant ? VARIANTS[variant] : undefined) ??
      v.get("snowflake.zk.mode");
    if (mode === "normal") {
      // Normal mode's tree is Java Leaf's: a name Java Leaf cannot run with blocks a rollback.
      try {
        checkJavaLeafName(v.get("name"), "name");
      } catch (error) {
        const { value, expected } = (error as LeafError).details;
        v.problem(
          "name",
          `invalid ${v.label("name")}: ${JSON.stringify(value)}; expected ${String(expected)}`,
        );
      }
    }
    return {
      kind: "zk",
      address,
      mode,
      sessionTimeoutMs: v.get("snowflake.zk.sessionTimeoutMs"),
      stopWithoutSession: v.get("snowflake.zk.stopWithoutSession"),
    };
  },
  leasingChoice: "zk with snowflake.zk.mode=recycle",
  grantsRequestedId: (settings) => settings.mode === "recycle",
  reuse: (settings) => ({
    reused: settings.mode === "recycle",
    configured: false,
    instead: "snowflake.zk.mode=recycle",
  }),
  async create(settings, { snowflake, worker }) {
    const { ZookeeperRegistry } = await import("@leaf/registry-zk");
    // Worker process 1 is the node Java Leaf knows, with the usual cache files; every other worker
    // process is a node of its own (its ip carries the worker suffix): a cache file of its own in
    // the port's folder, and Java Leaf's file, which is worker 1's, is not read.
    const own =
      worker !== undefined && worker.slot > 1
        ? {
            cacheFile: (node: NodeIdentity) =>
              join(
                tmpdir(),
                node.name,
                "registry-zk",
                String(node.port),
                `workerID${workerSuffix(worker.slot)}.json`,
              ),
            javaCacheFile: false as const,
          }
        : {};
    return new ZookeeperRegistry({
      url: settings.address,
      mode: settings.mode,
      sessionTimeoutMs: settings.sessionTimeoutMs,
      stopWithoutSession: settings.stopWithoutSession,
      clockToleranceMs: snowflake.toleranceMs,
      ...own,
    });
  },
  describe: (settings) => ({
    kind: "zk",
    mode: settings.mode,
    target: settings.address,
    shared: true,
  }),
};
