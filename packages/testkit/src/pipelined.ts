// Requests left waiting in a server's sockets: a raw HTTP/1.1 connection that pipelines GETs (all
// written at once, answers read back in order). Written while the server is stopped (SIGSTOP),
// they sit in its receive buffer and are the first thing it reads when it resumes, before any of
// its timers runs: the hardest moment for a holder that lost its lease while stopped.
import net from "node:net";

/** One answer on a pipelined connection. */
export interface PipelinedAnswer {
  status: number;
  body: string;
}

/** A keep-alive HTTP/1.1 connection to 127.0.0.1 that pipelines GETs. */
export class PipelinedConnection {
  private buffer: Buffer = Buffer.alloc(0);
  private readonly waiting: Array<{
    resolve: (a: PipelinedAnswer) => void;
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

  /** Connects to 127.0.0.1:`port` (the server must be running). */
  static open(port: number): Promise<PipelinedConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, "127.0.0.1");
      socket.once("connect", () => resolve(new PipelinedConnection(socket)));
      socket.once("error", reject);
    });
  }

  /** Writes `count` GETs of `path` in one write; one promise per answer, in order. */
  getEach(path: string, count: number): Array<Promise<PipelinedAnswer>> {
    const answers: Array<Promise<PipelinedAnswer>> = [];
    for (let i = 0; i < count; i++) {
      answers.push(
        this.failure
          ? Promise.reject(this.failure)
          : new Promise((resolve, reject) => this.waiting.push({ resolve, reject })),
      );
    }
    if (!this.failure) {
      this.socket.write(`GET ${path} HTTP/1.1\r\nHost: leaf\r\n\r\n`.repeat(count));
    }
    return answers;
  }

  /** Writes `count` GETs of `path` at once; resolves with all their answers, in order. */
  get(path: string, count = 1): Promise<PipelinedAnswer[]> {
    return Promise.all(this.getEach(path, count));
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
