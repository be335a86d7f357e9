// Requests left waiting in a server's sockets: raw HTTP/1.1 connections that pipeline GETs (all
// written at once, answers read back in order). Written while the server is stopped (SIGSTOP),
// they sit in its receive buffers and are the first thing it reads when it resumes, before any of
// its timers runs: the hardest moment for a holder that lost its lease while stopped.
import { PipelinedConnection } from "@leaf/testkit";
import type { HttpAnswer } from "./http-get";

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
      for (const answer of connection.getEach(path, count)) {
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
