// A partition between one server and one store (the test kit's TcpProxy drops every byte both ways,
// connections stay open), healed after 1-12 s.
import type { StoreKind } from "../cluster";
import type { Family } from "../families";
import { type Fault, storeEffect } from "./fault";

/** "A~mysql" for every server and store it reaches. */
export function links(family: Family): string[] {
  return family.servers
    .filter((s) => !s.spare)
    .flatMap((s) => s.links.map((store) => `${s.label}~${store}`));
}

/** ["A", "mysql"] of "A~mysql". */
export function splitLink(target: string): [string, StoreKind] {
  const [label, store] = target.split("~");
  return [label!, store as StoreKind];
}

export const linkCut: Fault = {
  name: "link-cut",
  title: "the link between one server and one store cut (TcpProxy), healed after 1-12 s",
  targets: links,
  resources: (target) => [`link:${target}`],
  durationMs: [1000, 12_000],
  async start(c, _family, target) {
    const [label, store] = splitLink(target);
    c.proxy(label, store).cutOff();
    return true;
  },
  async stop(c, _family, target) {
    const [label, store] = splitLink(target);
    c.proxy(label, store).heal();
  },
  effects: (family, target) => ({
    effects: [storeEffect(family, [splitLink(target)[0]], splitLink(target)[1])],
    settleMs: family.recoveryMs,
  }),
};
