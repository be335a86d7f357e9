// Free loopback ports. Servers get ports below the kernel's ephemeral range, so a port handed out
// here is never also the local end of some client's outgoing connection when a server restarts.
import { readFileSync } from "node:fs";
import net from "node:net";

/** Loopback address every private server binds to. */
export const LOOPBACK = "127.0.0.1";

const LOWEST_PORT = 10_000;

/** The first port of the kernel's ephemeral range (Linux), or undefined when unknown. */
function ephemeralRangeStart(): number | undefined {
  try {
    const [low] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8")
      .trim()
      .split(/\s+/);
    const value = Number(low);
    return Number.isInteger(value) && value > 0 ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Binds `port` on loopback (0 lets the kernel choose) and returns the bound port, or undefined. */
function tryBind(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once("error", () => resolve(undefined));
    server.listen({ host: LOOPBACK, port, exclusive: true }, () => {
      const address = server.address();
      const bound = typeof address === "object" && address ? address.port : undefined;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * Returns a TCP port that was free on 127.0.0.1 a moment ago. It is picked at random below the
 * ephemeral range (where outgoing connections take their local ports) when that range is known,
 * else by the kernel. Another process may still take it before you bind; the server starters
 * retry with a new port when that happens.
 */
export async function freePort(): Promise<number> {
  const rangeStart = ephemeralRangeStart();
  if (rangeStart !== undefined && rangeStart - LOWEST_PORT >= 1000) {
    for (let attempt = 0; attempt < 20; attempt++) {
      const candidate = LOWEST_PORT + Math.floor(Math.random() * (rangeStart - LOWEST_PORT));
      const bound = await tryBind(candidate);
      if (bound !== undefined) return bound;
    }
  }
  const bound = await tryBind(0);
  if (bound === undefined) throw new Error("[leaf] [testkit] could not bind any port on 127.0.0.1");
  return bound;
}
