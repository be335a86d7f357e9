// The messages between the primary process and its worker processes (server.workers), over
// node:cluster's IPC channel with the "advanced" serialization (bigints pass as they are). Every
// message carries `leaf`, so that cluster's and prom-client's own messages are told apart.
import { type ErrorCode, isLeafError, LeafError } from "@leaf/core";
import { bareMessage } from "@leaf/core/adapter";

/**
 * What a worker can ask the primary to collect from every worker: readiness, metrics, the
 * monitor's summary, a tag refresh after an admin change, the high-water marks, a mark forgotten
 * (`arg`: the tag).
 */
export type GatherKind =
  | "ready"
  | "metrics"
  | "monitor"
  | "refresh"
  | "high-water"
  | "forget-high-water";

/** Segment store operations a worker sends to the primary's store. */
export type StoreOp =
  | "listTags"
  | "describeTags"
  | "takeRange"
  | "createTag"
  | "updateStep"
  | "deleteTag"
  | "giveBack";

/**
 * The steps of a whole-server stop that every worker passes together: each has `settled` (its
 * clients stopped opening connections), then each has `closed` its listener (the port is gone).
 */
export type StopStep = "settled" | "closed";

/** A worker's state as the primary sees it. */
export type SlotState = "starting" | "running" | "restarting" | "stopping" | "stopped";

/**
 * One worker's answer to a gather; `value` is absent when it gave none (why: `state`, `missing`).
 */
export interface WorkerAnswer {
  slot: number;
  pid: number | undefined;
  state: SlotState;
  /** Restarts of this worker since the server started. */
  restarts: number;
  /** ms since 1970 when the current process of this worker was started. */
  startedAt: number | undefined;
  /** How its last process ended, when one did. */
  lastExit: { at: number; code: number | null; signal: string | null } | undefined;
  value?: unknown;
  /** Why there is no value: "not running", "no answer within N ms", an error text. */
  missing?: string;
}

/** An error as it crosses the channel (a LeafError keeps its code and details). */
export interface SentError {
  message: string;
  code?: string;
  leafCode?: number;
  component?: string;
  details?: Record<string, unknown>;
}

/** Messages a worker sends. */
export type FromWorker =
  | { leaf: "hello" }
  | { leaf: "ready"; workerId: number | undefined; node: string | undefined; tags: string[] }
  | { leaf: "failed"; message: string }
  | { leaf: "gather"; id: number; what: GatherKind; arg?: string }
  | { leaf: "collected"; id: number; value?: unknown; error?: string }
  | { leaf: "store"; id: number; op: StoreOp; args: unknown[] }
  | { leaf: "step"; step: StopStep };

/** Messages the primary sends. */
export type FromPrimary =
  | { leaf: "start"; slot: number; count: number; port: number; fingerprint: string }
  | { leaf: "stop"; drainMs: number }
  | { leaf: "collect"; id: number; what: GatherKind; arg?: string }
  | {
      leaf: "gathered";
      id: number;
      stopping: boolean;
      answers: WorkerAnswer[];
      /**
       * For "metrics": counters and histograms to add to the workers' answers, of processes that
       * ended and of workers that did not answer now (metrics-carry.ts).
       */
      carried?: unknown[][];
    }
  | { leaf: "store-result"; id: number; value?: unknown; error?: SentError }
  | { leaf: "step"; step: StopStep };

/** True for a message of ours (not cluster's or prom-client's). */
export function isLeafMessage(message: unknown): message is { leaf: string } {
  return typeof message === "object" && message !== null && "leaf" in message;
}

/** An error ready to cross the channel. */
export function sendableError(error: unknown): SentError {
  if (isLeafError(error)) {
    return {
      message: bareMessage(error),
      code: error.code,
      leafCode: error.leafCode,
      component: error.component,
      details: error.details,
    };
  }
  return { message: error instanceof Error ? error.message : String(error) };
}

/** The error that crossed the channel, as it was thrown (a LeafError again when it was one). */
export function receivedError(sent: SentError): Error {
  if (sent.code === undefined) return new Error(sent.message);
  return new LeafError({
    component: sent.component ?? "server",
    code: sent.code as ErrorCode,
    leafCode: sent.leafCode,
    message: sent.message,
    details: sent.details,
  });
}
