// How a node names itself to a registry. Java Leaf uses the first non-loopback IPv4 address, so the
// same rule keeps a migrating node's ip:port, and with it its worker id.
import { networkInterfaces } from "node:os";

/** The first non-internal IPv4 address of this machine, or 127.0.0.1 when there is none. */
export function localIPv4(): string {
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) {
      if (address.family === "IPv4" && !address.internal) return address.address;
    }
  }
  return "127.0.0.1";
}
