// Requests left waiting in a server's sockets: raw HTTP/1.1 connections that pipeline GETs (all
// written at once, answers read back in order). Written while the server is stopped (SIGSTOP),
// they sit in its receive buffers and are the first thing it reads when it resumes, before any of
// its timers runs: the hardest moment for a holder that lost its lease while stopped.
import net from "node:net";
import type { HttpAnswer } from "./http-get";

/** Pipelined GETs on one connection. */
class PipelinedConnection {
  private buffer: Buffer = Buffer.alloc(0);
  private readonly waiting: Array<{
    resolve: (a: HttpAnswer) => void;
    reject: (e: Error) => void;
  }> = [];
  private failure: Error | undefined;

  private constructor(private readonly socket: net.Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
      this.parse();
    });
    const fail = (error: Error) => {
      this.failure ??= error;
      for (const w of this.waiting.splice(0)) w.reject(this.failure);
    };
    socket.on("error", fail);
    socket.on("close", () => fail(new Error("the connection closed")));
  }

  static open(port: number): Promise<PipelinedConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, "127.0.0.1");
      socket.once("connect", () => resolve(new PipelinedConnection(socket)));
      socket.once("error", reject);
    });
  }

  /** Writes `count` GETs of `path` in one write; their answers, in order. */
  get(path: string, count: number): Array<Promise<HttpAnswer>> {
    const answers: Array<Promise<HttpAnswer>> = [];
    for (let i = 0; i < count; i++) {
      answers.push(
        this.failure
          ? Promise.reject(this.failure)
          : new Promise((resolve, reject) => this.waiting.push({ resolve, reject })),
      );
    }
    if (!this.failure)
      this.socket.write(`GET ${path} HTTP/1.1\r\nHost: leaf\r\n\r\n`.repeat(count));
    return answers;
  }

  close(): void {
    this.socket.destroy();
  }

  private parse(): void {
    for (;;) {
      const end = this.buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = this.buffer.subarray(0, end).toString("latin1");
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? "0");
      if (this.buffer.length < end + 4 + length) return;
      const body = this.buffer.subarray(end + 4, end + 4 + length).toString("utf8");
      this.buffer = this.buffer.subarray(end + 4 + length);
      this.waiting.shift()?.resolve({ status: Number(head.slice(9, 12)), body });
    }
  }
}

/** What the queued requests got: every answer, or the reason a request got none. */
export type QueuedOutcome = { answer: HttpAnswer } | { failed: string };

/** Several pipelined connections to one server, opened before it is stopped. */
export class QueuedRequests {
  private readonly pending: Array<Promise<QueuedOutcome>> = [];

  private constructor(private readonly connections: PipelinedConnection[]) {}

  /** Opens `connections` connections to 127.0.0.1:`port` (the server must be running). */
  static async open(port: number, connections: number): Promise<QueuedRequests> {
    const opened: PipelinedConnection[] = [];
    for (let i = 0; i < connections; i++) opened.push(await PipelinedConnection.open(port));
    return new QueuedRequests(opened);
  }

  /** Writes `count` GETs of `path` on every connection (they wait if the server is stopped). */
  queue(path: string, count: number): void {
    for (const connection of this.connections) {
      for (const answer of connection.get(path, count)) {
        this.pending.push(
          answer.then(
            (a) => ({ answer: a }),
            (error: Error) => ({ failed: error.message }),
          ),
        );
      }
    }
  }

  /** Waits for every queued request (at most `timeoutMs`, then the connections are closed). */
  async settle(timeoutMs: number): Promise<QueuedOutcome[]> {
    const timer = setTimeout(() => this.close(), timeoutMs);
    try {
      return await Promise.all(this.pending);
    } finally {
      clearTimeout(timer);
    }
  }

  close(): void {
    for (const connection of this.connections) connection.close();
  }
}
