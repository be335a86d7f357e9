// The etcd registry: worker ids held under etcd leases, ids recycled when a lease expires.
import { def } from "../config-def";
import { Expected, integer, nonEmpty, text } from "../config-readers";
import type { RegistryBackend } from "./backend";

/** Reads etcd client URLs: http://host:port[,http://host:port...] (https:// too). */
export function etcdUrl(raw: unknown): string {
  const t = text(raw);
  const ok =
    t?.split(",").every((part) => {
      try {
        const url = new URL(part.trim());
        return (
          (url.protocol === "http:" || url.protocol === "https:") &&
          url.hostname !== "" &&
          url.pathname === "/" &&
          url.search === "" &&
          url.hash === ""
        );
      } catch {
        return false;
      }
    }) === true;
  if (!ok) throw new Expected("etcd client URLs: http://host:2379[,http://host:2379...]");
  return t!;
}

export const ETCD_REGISTRY_KEYS = [
  def("snowflake.etcd.url", {
    type: "http://host:port[,...]",
    defaultText: "(none)",
    doc: "etcd registry: etcd's client URLs, comma-separated (`https://` is checked against the system's CA roots).",
    read: etcdUrl,
  }),
  def("snowflake.etcd.prefix", {
    type: "key prefix starting with /",
    defaultText: "/leaf/worker-ids",
    doc: "etcd registry: prefix of its keys (`<prefix>/<name>/holder/<id>`, `/id/<id>`).",
    read: nonEmpty("a key prefix", 200),
  }),
  def("snowflake.etcd.leaseTtlSeconds", {
    type: "1 to 3,600",
    defaultText: "10",
    doc: "etcd registry: TTL of the etcd lease a node holds its worker id under. The holder fences itself at min(1 s, TTL / 4) before it could expire, counted from the last renewal etcd confirmed.",
    read: integer(1, 3600),
  }),
] as const;

/** The etcd registry's settings. */
export interface EtcdRegistrySettings {
  kind: "etcd";
  url: string;
  prefix: string | undefined;
  leaseTtlSeconds: number | undefined;
}

export const etcdRegistry: RegistryBackend<
  "etcd",
  EtcdRegistrySettings,
  typeof ETCD_REGISTRY_KEYS
> = {
  kind: "etcd",
  keys: ETCD_REGISTRY_KEYS,
  addressKeys: ["snowflake.etcd.url"],
  shared: true,
  settings(v) {
    const url = v.optional("snowflake.etcd.url");
    if (url === undefined) {
      if (!v.named("snowflake.etcd.url")) {
        v.missing(
          "snowflake.etcd.url",
          "the snowflake registry is etcd, so etcd's client URL is needed",
        );
      }
      return undefined;
    }
    const prefix = v.optional("snowflake.etcd.prefix");
    if (prefix !== undefined && !/^\/\S*[^/\s]$/.test(prefix)) {
      v.problem(
        "snowflake.etcd.prefix",
        `invalid ${v.label("snowflake.etcd.prefix")}: ${JSON.stringify(prefix)}; expected a key prefix starting with "/", not ending with "/", without spaces`,
      );
    }
    return {
      kind: "etcd",
      url,
      prefix,
      leaseTtlSeconds: v.optional("snowflake.etcd.leaseTtlSeconds"),
    };
  },
  leasingChoice: "etcd",
  grantsRequestedId: () => true,
  reuse: () => ({ reused: true, configured: false }),
  async create(settings) {
    const { EtcdRegistry } = await import("@leaf/registry-etcd");
    return new EtcdRegistry({
      url: settings.url,
      ...(settings.prefix !== undefined ? { prefix: settings.prefix } : {}),
      ...(settings.leaseTtlSeconds !== undefined
        ? { leaseTtlSeconds: settings.leaseTtlSeconds }
        : {}),
    });
  },
  describe: (settings) => ({
    kind: "etcd",
    mode: "lease",
    target: settings.url
      .split(",")
      .map((part) => new URL(part.trim()).host)
      .join(","),
    shared: true,
  }),
};
