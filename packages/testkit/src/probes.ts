// Readiness probes: a server is ready when a real request gets a real answer, and the answer shows
// it is our server (its pid or data folder), not another process that grabbed the port first.
import net from "node:net";

const PROBE_TIMEOUT_MS = 2000;
/**
 * While it starts, ZooKeeper sometimes accepts a connection and never answers it; a healthy server
 * answers in a few ms, so a startup probe gives up early and tries again.
 */
const STARTUP_PROBE_TIMEOUT_MS = 500;

/**
 * Connects, writes `request` and collects everything until the server closes the connection.
 * Rejects on connection errors and after `timeoutMs`.
 */
export function exchange(
  host: string,
  port: number,
  request: string,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    let received = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer from ${host}:${port} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.setEncoding("utf8");
    socket.on("connect", () => socket.write(request));
    socket.on("data", (chunk: string) => {
      received += chunk;
    });
    socket.on("end", () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(received);
    });
    socket.on("error", (error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(error);
    });
  });
}

/** Redis answers INFO; returns the server's process_id (undefined when it is not Redis). */
export async function redisPid(host: string, port: number): Promise<number | undefined> {
  const reply = await exchange(host, port, "INFO server\r\nQUIT\r\n", STARTUP_PROBE_TIMEOUT_MS);
  const match = /process_id:(\d+)/.exec(reply);
  return match ? Number(match[1]) : undefined;
}

/** Redis (or anything speaking RESP) answers PING, possibly with an auth error. */
export async function redisAnswers(host: string, port: number): Promise<boolean> {
  const reply = await exchange(host, port, "PING\r\nQUIT\r\n");
  return reply.startsWith("+") || reply.startsWith("-");
}

/**
 * ZooKeeper's `conf` command; answered only once the server serves requests. Returns the text, or
 * undefined while it is not serving yet.
 */
export async function zookeeperConf(host: string, port: number): Promise<string | undefined> {
  const reply = await exchange(host, port, "conf", STARTUP_PROBE_TIMEOUT_MS);
  return reply.includes("clientPort=") ? reply : undefined;
}

/** ZooKeeper answers `srvr` with its mode once it serves requests. */
export async function zookeeperServes(host: string, port: number): Promise<boolean> {
  const reply = await exchange(host, port, "srvr");
  return reply.includes("Mode:");
}
