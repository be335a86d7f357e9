// A small HTTP GET over keep-alive connections, with a hard time limit (127.0.0.1 only): how a
// LeafServerProcess is probed and read, and the chaos load driver's way of talking to servers.
import { Agent, request } from "node:http";

/** A completed answer, whatever its status. */
export interface HttpAnswer {
  status: number;
  body: string;
}

/** A request that got no answer: refused, reset, timed out. `code` is short and stable. */
export class NoAnswer extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "NoAnswer";
  }
}

/** Options of {@link httpGet}. */
export interface GetOptions {
  /** Keep-alive agent (default: a new connection per request). */
  agent?: Agent;
  /** Whole request limit in ms (connect, wait, body). */
  timeoutMs: number;
  headers?: Record<string, string>;
}

/**
 * GETs `path` from 127.0.0.1:`port`. Rejects with {@link NoAnswer} when no answer arrives in time.
 */
export function httpGet(port: number, path: string, options: GetOptions): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (code: string, message: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(new NoAnswer(code, message));
    };
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        method: "GET",
        agent: options.agent ?? false,
        headers: options.headers,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("error", (error: NodeJS.ErrnoException) =>
          fail(error.code ?? "RESPONSE_ERROR", error.message),
        );
        res.on("end", () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") });
        });
        res.on("aborted", () => fail("ECONNRESET", "the answer was cut off"));
      },
    );
    const timer = setTimeout(() => {
      fail("TIMEOUT", `no answer from 127.0.0.1:${port}${path} within ${options.timeoutMs} ms`);
      req.destroy();
    }, options.timeoutMs);
    req.on("error", (error: NodeJS.ErrnoException) =>
      fail(error.code ?? "REQUEST_ERROR", error.message),
    );
    req.end();
  });
}

/** A keep-alive agent for one server, with one socket per concurrent loop. */
export function keepAliveAgent(sockets: number): Agent {
  return new Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets });
}
