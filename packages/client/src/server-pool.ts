// The list of Leaf servers a client talks to: which one to ask next, its health and circuit
// breaker, failover on errors and timeouts, jittered retries, one deadline per call and the
// caller's AbortSignal.
import { performance } from "node:perf_hooks";
import { ClientErrorCodes, LeafClientError } from "./errors";

/**
 * The breaker of one server: closed (used), open (skipped until `openUntil`), half-open (one
 * trial).
 */
export type BreakerState = "closed" | "open" | "half-open";

/** How one server is doing, as {@link LeafClient.servers} shows it. */
export interface ServerHealth {
  /** Base URL, as given (without a trailing slash). */
  url: string;
  state: BreakerState;
  /** Failures since the last success. */
  consecutiveFailures: number;
  /** Requests answered (a 4xx answer counts: the server is up). */
  successes: number;
  /** Requests failed (network error, timeout, 5xx). */
  failures: number;
  /** The last failure's message, or null. */
  lastError: string | null;
  /** Moving average of the time to answer, in ms; null before the first answer. */
  latencyMs: number | null;
  /** While open: ms (performance.now() clock) until a trial request is let through. */
  retryInMs: number | null;
}

/** Settings of a {@link ServerPool}, checked by the client. */
export interface PoolSettings {
  servers: string[];
  /** Longest wait for one server's answer, ms. */
  requestTimeoutMs: number;
  /** Rounds over the servers after the first one, each after a jittered backoff. */
  retries: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** Consecutive failures that open a server's breaker. */
  breakerFailures: number;
  /**
   * How long an opened breaker stays open first; doubles on each failed trial up to
   * breakerMaxOpenMs.
   */
  breakerOpenMs: number;
  breakerMaxOpenMs: number;
  fetch: typeof fetch;
  headers: Record<string, string>;
}

/** One request of a call. */
export interface PoolRequest<T> {
  /** Path and query, from the server's base URL on (e.g. "/api/v1/segment/a/range?count=5"). */
  path: string;
  /** Access token, sent as `Authorization: Bearer`. */
  token: string | undefined;
  /** performance.now() past which the call fails with TIMEOUT. */
  deadline: number;
  signal: AbortSignal | undefined;
  /** Reads a 200 answer's JSON; throws BAD_RESPONSE when it is not what the API documents. */
  parse(body: unknown, server: string): T;
}

class Server {
  state: BreakerState = "closed";
  consecutiveFailures = 0;
  successes = 0;
  failures = 0;
  lastError: string | null = null;
  latencyMs: number | null = null;
  openUntil = 0;
  openMs: number;
  trialInFlight = false;

  constructor(
    readonly url: string,
    openMs: number,
  ) {
    this.openMs = openMs;
  }
}

const abortedError = (signal: AbortSignal): LeafClientError =>
  new LeafClientError({
    code: ClientErrorCodes.ABORTED,
    message: "the call was aborted by its AbortSignal",
    cause: signal.reason,
  });

/** Statuses after which another server is asked: the condition belongs to this server. */
function failsOver(status: number, code: string): boolean {
  if (status >= 500 || status === 429 || status === 408) return true;
  // A mode disabled here may be enabled on another server.
  return status === 404 && code === "MODE_DISABLED";
}

/**
 * A server that has not read a tag yet (created on another server since its last tag refresh)
 * answers UNKNOWN_TAG while the others may know it: the rest of the round is asked before the
 * caller sees it. The server is up, so its breaker is not touched.
 */
function isUnknownTag(error: unknown): error is LeafClientError {
  return error instanceof LeafClientError && error.status === 404 && error.code === "UNKNOWN_TAG";
}

/** `error` with the failures of the servers that could not be asked in the same round. */
function withAttempts(error: LeafClientError, attempts: LeafClientError[]): LeafClientError {
  if (attempts.length === 0) return error;
  return new LeafClientError({
    code: error.code,
    leafCode: error.leafCode,
    status: error.status,
    server: error.server,
    message: `${error.message.replace(/^\[leaf\] \[client\] /, "")}; the other servers could not be asked${summary(attempts)}`,
    attempts,
    cause: error.cause,
  });
}

/** Asks the servers in turn until one answers, within the call's deadline. */
export class ServerPool {
  private readonly list: Server[];
  private next = 0;

  constructor(private readonly settings: PoolSettings) {
    this.list = settings.servers.map((url) => new Server(url, settings.breakerOpenMs));
  }

  health(): ServerHealth[] {
    const now = performance.now();
    return this.list.map((s) => ({
      url: s.url,
      state: s.state === "open" && now >= s.openUntil ? "half-open" : s.state,
      consecutiveFailures: s.consecutiveFailures,
      successes: s.successes,
      failures: s.failures,
      lastError: s.lastError,
      latencyMs: s.latencyMs,
      retryInMs: s.state === "open" ? Math.max(0, s.openUntil - now) : null,
    }));
  }

  /**
   * The answer of the first server that gives one. A server that fails (network error, timeout,
   * 5xx) is skipped for the next; after a round over every usable server, a jittered backoff, up to
   * `retries` more rounds. A 4xx answer (bad argument, token) is thrown at once: every server would
   * give it. UNKNOWN_TAG is thrown once every other server of the round said so too or failed
   * (a server may not have read a new tag yet). Fails with TIMEOUT at the deadline, UNAVAILABLE
   * when the rounds are used up, ABORTED when the signal fires; the last failure of each attempt is
   * in `attempts`.
   */
  async request<T>(req: PoolRequest<T>): Promise<T> {
    const attempts: LeafClientError[] = [];
    for (let round = 0; ; round++) {
      if (req.signal?.aborted) throw abortedError(req.signal);
      /** An UNKNOWN_TAG answer in this round: thrown when no other server knows the tag either. */
      let unknown: LeafClientError | undefined;
      for (const server of this.order()) {
        if (performance.now() >= req.deadline) throw this.gaveUp(req, attempts, true);
        if (!this.admit(server)) continue;
        try {
          return await this.once(server, req);
        } catch (error) {
          if (req.signal?.aborted) throw abortedError(req.signal);
          if (isUnknownTag(error)) {
            unknown ??= error;
            continue;
          }
          if (!this.countsAgainst(error)) throw error;
          attempts.push(error as LeafClientError);
        }
      }
      if (unknown !== undefined) throw withAttempts(unknown, attempts);
      if (round >= this.settings.retries) throw this.gaveUp(req, attempts, false);
      const base = Math.min(this.settings.retryMaxMs, this.settings.retryBaseMs * 2 ** round);
      // Full jitter: clients that failed together do not come back together.
      let wait = Math.random() * base;
      // With every breaker open, wait for the first trial rather than spin through empty rounds.
      const firstTrial = Math.min(...this.list.map((s) => (s.state === "open" ? s.openUntil : 0)));
      if (firstTrial > 0) wait = Math.max(wait, firstTrial - performance.now());
      const left = req.deadline - performance.now();
      if (left <= 0) throw this.gaveUp(req, attempts, true);
      await sleep(Math.min(wait, left), req.signal);
    }
  }

  /** Servers to try, starting one further each call so that load spreads over the closed ones. */
  private order(): Server[] {
    const n = this.list.length;
    const start = this.next;
    this.next = (this.next + 1) % n;
    const out: Server[] = [];
    for (let i = 0; i < n; i++) out.push(this.list[(start + i) % n]!);
    // Healthy servers first, then those whose breaker lets a trial through.
    return out.sort((a, b) => (a.state === "closed" ? 0 : 1) - (b.state === "closed" ? 0 : 1));
  }

  /** True when `server` may be asked now (closed, or open past its wait with no trial running). */
  private admit(server: Server): boolean {
    if (server.state === "closed") return true;
    if (server.trialInFlight || performance.now() < server.openUntil) return false;
    server.state = "half-open";
    server.trialInFlight = true;
    return true;
  }

  private async once<T>(server: Server, req: PoolRequest<T>): Promise<T> {
    const startedAt = performance.now();
    const timeoutMs = Math.max(
      1,
      Math.ceil(Math.min(this.settings.requestTimeoutMs, req.deadline - startedAt)),
    );
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
    const headers: Record<string, string> = {
      accept: "application/json",
      ...this.settings.headers,
    };
    if (req.token !== undefined) headers.authorization = `Bearer ${req.token}`;
    let status: number;
    let text: string;
    try {
      const res = await this.settings.fetch(server.url + req.path, { headers, signal });
      status = res.status;
      text = await res.text();
    } catch (cause) {
      if (req.signal?.aborted) throw abortedError(req.signal);
      const timedOut = timeout.aborted;
      throw this.failed(
        server,
        new LeafClientError({
          code: timedOut ? ClientErrorCodes.TIMEOUT : ClientErrorCodes.UNAVAILABLE,
          message: timedOut
            ? `${server.url} did not answer within ${Math.round(timeoutMs)} ms`
            : `${server.url} could not be reached: ${describe(cause)}`,
          server: server.url,
          cause,
        }),
      );
    }
    if (status === 200) {
      let value: T;
      try {
        value = req.parse(JSON.parse(text), server.url);
      } catch (cause) {
        throw this.failed(
          server,
          cause instanceof LeafClientError
            ? cause
            : new LeafClientError({
                code: ClientErrorCodes.BAD_RESPONSE,
                message: `${server.url} answered 200 with a body that is not JSON: ${text.slice(0, 80)}`,
                server: server.url,
                status,
                cause,
              }),
        );
      }
      this.succeeded(server, performance.now() - startedAt);
      return value;
    }
    const error = serverError(server.url, status, text);
    if (failsOver(status, error.code)) throw this.failed(server, error);
    // The server is up and says no: every server would say the same.
    this.succeeded(server, performance.now() - startedAt);
    throw error;
  }

  private succeeded(server: Server, ms: number): void {
    server.successes++;
    server.consecutiveFailures = 0;
    server.latencyMs = server.latencyMs === null ? ms : server.latencyMs * 0.8 + ms * 0.2;
    server.state = "closed";
    server.trialInFlight = false;
    server.openMs = this.settings.breakerOpenMs;
  }

  private failed(server: Server, error: LeafClientError): LeafClientError {
    server.failures++;
    server.consecutiveFailures++;
    server.lastError = error.message;
    if (server.state === "half-open") {
      // The trial failed: open again, for longer while another server answers (this one is worse
      // than its peers). When none does, the cause is likely shared (a store outage, a tag refused
      // on every server): each is tried again after breaker.openMs, so that the pool finds the
      // servers back within about that, not after a doubled wait of up to breaker.maxOpenMs.
      const othersAnswer = this.list.some(
        (s) => s !== server && s.state === "closed" && s.consecutiveFailures === 0,
      );
      server.openMs = othersAnswer
        ? Math.min(server.openMs * 2, this.settings.breakerMaxOpenMs)
        : this.settings.breakerOpenMs;
      this.open(server);
    } else if (server.consecutiveFailures >= this.settings.breakerFailures) {
      this.open(server);
    }
    server.trialInFlight = false;
    return error;
  }

  private open(server: Server): void {
    server.state = "open";
    // +-20 %: the breakers of many clients do not let their trials through at one instant.
    server.openUntil = performance.now() + server.openMs * (0.8 + Math.random() * 0.4);
  }

  /** True when the failure is the server's (try another), false when the caller must see it. */
  private countsAgainst(error: unknown): boolean {
    if (!(error instanceof LeafClientError)) return false;
    if (error.code === ClientErrorCodes.ABORTED) return false;
    return (
      error.status === undefined ||
      failsOver(error.status, error.code) ||
      error.code === ClientErrorCodes.BAD_RESPONSE
    );
  }

  private gaveUp<T>(
    req: PoolRequest<T>,
    attempts: LeafClientError[],
    deadline: boolean,
  ): LeafClientError {
    const last = attempts[attempts.length - 1];
    const tried = summary(attempts);
    return new LeafClientError({
      code: deadline ? ClientErrorCodes.TIMEOUT : ClientErrorCodes.UNAVAILABLE,
      message: deadline
        ? `no server answered ${req.path.split("?")[0]} before the call's deadline${tried}`
        : `every server failed for ${req.path.split("?")[0]}${tried}; check that the servers run and can reach their store`,
      leafCode: last?.leafCode,
      status: last?.status,
      server: last?.server,
      attempts,
      cause: last,
    });
  }
}

/** ": url: message; url: message" with each server's last failure, or "" when none was asked. */
function summary(attempts: LeafClientError[]): string {
  if (attempts.length === 0) return " (no server was usable: every breaker is open)";
  const last = new Map<string, string>();
  for (const a of attempts)
    last.set(a.server ?? "?", a.message.replace(/^\[leaf\] \[client\] /, ""));
  return `: ${[...last.values()].join("; ")}`;
}

/** The error a server's non-200 answer describes (its code, Leaf code and message kept). */
function serverError(server: string, status: number, text: string): LeafClientError {
  let body: { code?: unknown; leafCode?: unknown; message?: unknown } = {};
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed !== null && typeof parsed === "object") body = parsed as typeof body;
  } catch {
    // A proxy's HTML page or a plain-text answer: the status says enough.
  }
  const code = typeof body.code === "string" ? body.code : `HTTP_${status}`;
  const message = typeof body.message === "string" ? body.message : text.slice(0, 200);
  return new LeafClientError({
    code,
    leafCode: typeof body.leafCode === "number" ? body.leafCode : undefined,
    status,
    server,
    message: `${server} answered ${status} ${code}: ${message.replace(/^\[leaf\] /, "")}`,
  });
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
}

/** Waits `ms`, or rejects with ABORTED when `signal` fires first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortedError(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortedError(signal!));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
