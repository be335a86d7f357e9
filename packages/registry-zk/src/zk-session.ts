// One ZooKeeper session, with promises, time limits on every request, and a local judgement of
// when the session may be gone. node-zookeeper-client has no read timeout: against a hung server
// it never reports a disconnection. So the session sends its own heartbeats and, when no proof of
// life came for `silenceLimitMs` (measured on the monotonic clock from the moment the last proven
// request was sent), declares itself lost: before the leader can expire it.
//
// Only an answer that went through the leader proves the session alive: a write (a transaction the
// leader ordered; the heartbeat is a one-op transaction that checks "/"). A read is answered by
// whichever server the client talks to, and a follower cut off from the leader keeps answering
// reads from its own copy while the leader expires the session. `fenceAt` publishes the deadline.
import { performance } from "node:perf_hooks";
import { ErrorCodes, LeafCodes, LeafError } from "@leaf/core";
import zookeeper from "node-zookeeper-client";
import { type DigestAuth, toClientAcls, type ZkAcl } from "./acl";
import { COMPONENT } from "./options";
import { acceptNewerErrorCodes, forceClose, zkCode } from "./zk-client";
import { ZkNodeOperations } from "./zk-nodes";

/** What a session needs to connect. */
export interface SessionSettings {
  /** `host:port[,host:port...]` without the chroot. */
  servers: string;
  /** "" or an absolute path. */
  chroot: string;
  sessionTimeoutMs: number;
  connectTimeoutMs: number;
  operationTimeoutMs: number | undefined;
  silenceLimitMs: number | undefined;
  auth: DigestAuth | undefined;
  acls: readonly ZkAcl[];
}

/**
 * Errors of a write that the leader's request preparation produces (the transaction still goes
 * through the leader): such an answer proves the leader saw the request as much as a success.
 */
const LEADER_CODES = new Set<number>([
  zookeeper.Exception.NO_NODE,
  zookeeper.Exception.NODE_EXISTS,
  zookeeper.Exception.BAD_VERSION,
  zookeeper.Exception.NOT_EMPTY,
]);
/** Heartbeats in flight at most: while the leader does not answer, more would only queue. */
const MAX_HEARTBEATS_IN_FLIGHT = 3;
const AUTH_CODES = new Set<number>([
  zookeeper.Exception.NO_AUTH,
  zookeeper.Exception.AUTH_FAILED,
  zookeeper.Exception.INVALID_ACL,
]);
/**
 * A connected ZooKeeper session; its node operations (getData, exists, getChildren, create,
 * setData, remove, multi, ensurePath) are in {@link ZkNodeOperations}. Create with {@link
 * ZkSession.open}.
 */
export class ZkSession extends ZkNodeOperations {
  /** Aborted when the session is gone or may be gone; the reason is a LeafError (LEASE_LOST). */
  readonly lost: AbortSignal;
  /** Session id, 16 hex digits. */
  readonly sessionId: string;
  /** Session timeout the server granted, in ms. */
  readonly sessionTimeoutMs: number;
  /**
   * Time after the send of the last request the leader answered (a write) at which the session
   * counts as lost, in ms: `fenceAt` is that send time plus this.
   */
  readonly silenceLimitMs: number;
  private readonly lostController = new AbortController();
  protected readonly acls: zookeeper.ACL[];
  private readonly operationTimeoutMs: number;
  private readonly failPending = new Set<(error: LeafError) => void>();
  /** performance.now() at which the last request the leader answered was sent. */
  private lastProvenSentAt: number;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private silenceTimer: NodeJS.Timeout | undefined;
  private heartbeatsInFlight = 0;
  private closed = false;
  private closing: Promise<void> | undefined;

  private constructor(
    protected readonly client: zookeeper.Client,
    private readonly settings: SessionSettings,
    connectSentAt: number,
  ) {
    super();
    this.lost = this.lostController.signal;
    this.sessionId = client.getSessionId().toString("hex");
    this.sessionTimeoutMs = client.getSessionTimeout();
    this.silenceLimitMs = Math.min(
      settings.silenceLimitMs ?? Math.floor((this.sessionTimeoutMs * 2) / 3),
      this.sessionTimeoutMs - 1,
    );
    this.operationTimeoutMs = settings.operationTimeoutMs ?? this.sessionTimeoutMs;
    this.acls = toClientAcls(settings.acls);
    // The leader created the session after this: its expiry clock started later.
    this.lastProvenSentAt = connectSentAt;
    client.on("expired", () => this.lose("the server expired the session"));
    client.on("authenticationFailed", () =>
      this.lose("the server refused the credentials (authentication failed)"),
    );
  }

  /**
   * The `performance.now()` instant (ms) after which the leader may have expired this session:
   * the send time of the last request the leader answered, plus `silenceLimitMs`. Moves forward
   * with every such answer; 0 once the session is lost or closed.
   */
  get fenceAt(): number {
    if (this.lost.aborted || this.closed) return 0;
    return this.lastProvenSentAt + this.silenceLimitMs;
  }

  /**
   * Heartbeats every twelfth of the silence limit, sent whether or not the previous one was
   * answered, so the server this client talks to hears from it regularly (the leader learns of it
   * through that server's pings); and the silence check.
   */
  private startTimers(): void {
    const heartbeatMs = Math.max(20, Math.floor(this.silenceLimitMs / 12));
    this.heartbeatTimer = setInterval(() => this.heartbeat(), heartbeatMs);
    this.heartbeatTimer.unref();
    this.silenceTimer = setInterval(
      () => this.checkSilence(),
      Math.max(10, Math.min(100, Math.floor(heartbeatMs / 2))),
    );
    this.silenceTimer.unref();
  }

  /**
   * Connects, waits for the session (at most `connectTimeoutMs`) and for one request the leader
   * answered. Rejects with UNAVAILABLE when no server answers in time, or with the signal's reason.
   */
  static async open(settings: SessionSettings, signal?: AbortSignal): Promise<ZkSession> {
    acceptNewerErrorCodes();
    signal?.throwIfAborted();
    const where = `${settings.servers}${settings.chroot}`;
    let connectSentAt = performance.now();
    const client = zookeeper.createClient(`${settings.servers}${settings.chroot}`, {
      sessionTimeout: settings.sessionTimeoutMs,
      spinDelay: 200,
      retries: 0,
    });
    if (settings.auth) {
      client.addAuthInfo(
        "digest",
        Buffer.from(`${settings.auth.username}:${settings.auth.password}`),
      );
    }
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          cleanup();
          reject(
            new LeafError({
              component: COMPONENT,
              code: ErrorCodes.UNAVAILABLE,
              message:
                `could not connect to ZooKeeper at ${where} within ${settings.connectTimeoutMs} ms; ` +
                "check that the servers run and the connection string is right (connectTimeoutMs)",
              details: { url: where, connectTimeoutMs: settings.connectTimeoutMs },
            }),
          );
        }, settings.connectTimeoutMs);
        const onConnected = () => {
          cleanup();
          resolve();
        };
        const onAbort = () => {
          cleanup();
          reject(signal?.reason);
        };
        const onAuthFailed = () => {
          cleanup();
          reject(
            new LeafError({
              component: COMPONENT,
              code: ErrorCodes.INVALID_CONFIG,
              message: `ZooKeeper at ${where} refused the credentials; check the auth option`,
              details: { key: "auth" },
            }),
          );
        };
        const cleanup = () => {
          clearTimeout(timer);
          client.removeListener("connected", onConnected);
          client.removeListener("authenticationFailed", onAuthFailed);
          signal?.removeEventListener("abort", onAbort);
        };
        client.once("connected", onConnected);
        client.once("authenticationFailed", onAuthFailed);
        signal?.addEventListener("abort", onAbort, { once: true });
        connectSentAt = performance.now();
        client.connect();
      });
    } catch (error) {
      void forceClose(client);
      throw error;
    }
    const session = new ZkSession(client, settings, connectSentAt);
    try {
      await session.prove();
    } catch (error) {
      void session.close();
      throw error;
    }
    session.startTimers();
    return session;
  }

  /**
   * Ends the session; resolves once the server confirmed (its ephemeral nodes are gone then) or,
   * against a server that does not answer, after at most a second. Idempotent.
   */
  close(): Promise<void> {
    if (this.closing) return this.closing;
    this.closed = true;
    this.stopTimers();
    // A call still waiting when the session was lost (say an acquire on a loaded machine whose
    // heartbeat came too late) failed on ZooKeeper's side of things, not on a close() of the
    // caller's: UNAVAILABLE, which an acquire's caller retries, naming why the session ended.
    const lost = this.lost.aborted ? (this.lost.reason as LeafError) : undefined;
    const closing = new LeafError({
      component: COMPONENT,
      code: lost ? ErrorCodes.UNAVAILABLE : ErrorCodes.CLOSED,
      message: lost
        ? `${lost.message}; the call waiting on it was not answered`
        : `ZooKeeper session 0x${this.sessionId} was closed`,
      ...(lost ? { details: lost.details } : {}),
    });
    for (const fail of [...this.failPending]) fail(closing);
    this.closing = forceClose(this.client);
    return this.closing;
  }

  /** Declares the session lost (idempotent) and closes it. */
  lose(why: string): void {
    if (this.lost.aborted || this.closed) return;
    this.lostController.abort(
      new LeafError({
        component: COMPONENT,
        code: ErrorCodes.LEASE_LOST,
        leafCode: LeafCodes.LEASE_LOST,
        message: `ZooKeeper session 0x${this.sessionId} lost: ${why}`,
        details: { sessionId: this.sessionId, sessionTimeoutMs: this.sessionTimeoutMs },
      }),
    );
    void this.close();
  }

  /**
   * A transaction that only checks that "/" exists: the cheapest request the leader must order.
   * Its answer moves `fenceAt`; resolves on any answer of the leader.
   */
  async prove(): Promise<void> {
    try {
      await this.multi([{ op: "check", path: "/", version: -1 }]);
    } catch (error) {
      // "/" is the chroot, which may not exist yet: the leader answered all the same.
      const code = zkCode(error);
      if (code === undefined || !LEADER_CODES.has(code)) throw error;
    }
  }

  protected request<T>(
    what: string,
    kind: "read" | "write",
    run: (done: (error: unknown, value: T | undefined) => void) => void,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.closed || this.lost.aborted) {
        reject(
          unavailable(`cannot ${what}: ZooKeeper session 0x${this.sessionId} is closed`, what),
        );
        return;
      }
      const sentAt = performance.now();
      let settled = false;
      const settle = (error: unknown, value?: T) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.failPending.delete(settle);
        if (error) reject(this.wrap(error, what));
        else resolve(value as T);
      };
      const timer = setTimeout(
        () =>
          settle(
            unavailable(
              `ZooKeeper did not answer "${what}" within ${this.operationTimeoutMs} ms (operationTimeoutMs)`,
              what,
            ),
          ),
        this.operationTimeoutMs,
      );
      this.failPending.add(settle);
      try {
        run((error, value) => {
          if (kind === "write" && answeredByLeader(error)) this.proven(sentAt);
          settle(error, value);
        });
      } catch (error) {
        settle(error);
      }
    });
  }

  private wrap(error: unknown, what: string): LeafError {
    if (error instanceof LeafError) return error;
    if (error instanceof zookeeper.Exception) {
      const code = error.getCode();
      const details = { zkCode: code, zkError: error.getName(), operation: what };
      if (AUTH_CODES.has(code)) {
        return new LeafError({
          component: COMPONENT,
          code: ErrorCodes.INVALID_CONFIG,
          message:
            `ZooKeeper refused to ${what}: ${error.getName()}; check the auth and acl options ` +
            "and the ACLs of the existing nodes",
          details: { key: "auth", ...details },
          cause: error,
        });
      }
      return new LeafError({
        component: COMPONENT,
        code: ErrorCodes.UNAVAILABLE,
        message: `ZooKeeper could not ${what}: ${error.getName()}`,
        details,
        cause: error,
      });
    }
    return new LeafError({
      component: COMPONENT,
      code: ErrorCodes.UNAVAILABLE,
      message: `ZooKeeper request "${what}" failed: ${(error as Error)?.message ?? String(error)}`,
      details: { operation: what },
      cause: error,
    });
  }

  private proven(sentAt: number): void {
    if (sentAt > this.lastProvenSentAt) this.lastProvenSentAt = sentAt;
  }

  private heartbeat(): void {
    if (this.heartbeatsInFlight >= MAX_HEARTBEATS_IN_FLIGHT || this.closed) return;
    this.heartbeatsInFlight++;
    this.prove()
      .catch(() => {})
      .finally(() => {
        this.heartbeatsInFlight--;
      });
  }

  private checkSilence(): void {
    const now = performance.now();
    if (now >= this.fenceAt) {
      this.lose(
        `the ZooKeeper leader answered nothing sent in the last ${Math.round(now - this.lastProvenSentAt)} ms ` +
          `(limit ${this.silenceLimitMs} ms, session timeout ${this.sessionTimeoutMs} ms): it may expire the session`,
      );
    }
  }

  private stopTimers(): void {
    clearInterval(this.heartbeatTimer);
    clearInterval(this.silenceTimer);
    this.heartbeatTimer = undefined;
    this.silenceTimer = undefined;
  }

  /** Creates the chroot path through a short session without chroot. */
  protected async createChroot(): Promise<void> {
    const root = await ZkSession.open({ ...this.settings, chroot: "" });
    try {
      await root.ensurePath(this.settings.chroot);
    } finally {
      await root.close();
    }
  }
}

/** Whether a write's answer came through the leader: a success, or an error it produced. */
function answeredByLeader(error: unknown): boolean {
  if (!error) return true;
  return error instanceof zookeeper.Exception && LEADER_CODES.has(error.getCode());
}

function unavailable(message: string, what: string): LeafError {
  return new LeafError({
    component: COMPONENT,
    code: ErrorCodes.UNAVAILABLE,
    message,
    details: { operation: what },
  });
}
