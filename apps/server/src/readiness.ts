// What a load balancer asks (/health/ready): can every enabled mode serve? A segment tag that is
// loaded on its first request, refused or used up is a fact about that tag, reported per tag (here,
// in the metrics and on the monitor), never the node's readiness: a node that serves every other
// tag must get the traffic, and a lazy tag is loaded by exactly the request readiness would hold
// back.
import type { TagSnapshot } from "@leaf/segment";
import { registryBackend } from "./backends/index";
import type { AppContext } from "./id-sources";

/**
 * A segment tag on this node: `ready` (a range loaded), `lazy` (its first range is taken by its
 * first request), `loading` (a load in flight, none failed), `load-failing` (loads fail and are
 * retried: the store is down or slow), `refused` (CORRUPT_DATA: no range until its row is fixed),
 * `exhausted` (used up: no range fits below 2^63 - 1; the ids still held are served).
 */
export type TagState = "ready" | "lazy" | "loading" | "load-failing" | "refused" | "exhausted";

/** Every {@link TagState}, in the order they are shown. */
export const TAG_STATES: readonly TagState[] = [
  "ready",
  "lazy",
  "loading",
  "load-failing",
  "refused",
  "exhausted",
];

/** The state of one tag, from its snapshot. */
export function tagState(snap: TagSnapshot): TagState {
  if (snap.refused !== null) return snap.refused.reason === "exhausted" ? "exhausted" : "refused";
  if (snap.consecutiveFailures > 0) return "load-failing";
  if (!snap.initialized) return snap.loading ? "loading" : "lazy";
  return "ready";
}

/** One mode's readiness. */
export interface Check {
  ready: boolean;
  detail: string;
  /** Segment mode: tags by state on this node (none of them changes `ready`). */
  tags?: Record<TagState, number>;
  /** Segment mode: the tags that need an operator (refused, used up, loads failing), at most 20. */
  attention?: Array<{ tag: string; state: TagState; reason: string }>;
}

/** Tags listed in a check's `attention`. */
const ATTENTION_LIMIT = 20;

/**
 * Readiness of every enabled mode: segment mode running (its tag list read), the snowflake lease
 * held, Redis answering. Not ready while starting, draining or stopping.
 */
export function readiness(ctx: AppContext): Record<string, Check> {
  const checks: Record<string, Check> = {};
  const services = ctx.services;
  const running = ctx.state === "running";
  const notRunning =
    ctx.state === "draining"
      ? `draining: still answering, the port closes in ${Math.max(0, (ctx.drainEndsAt ?? 0) - Date.now())} ms`
      : ctx.state === "stopping"
        ? "shutting down"
        : "starting";
  if (ctx.config.segment) {
    const segment = services?.segment;
    if (!segment || !running) checks.segment = { ready: false, detail: notRunning };
    else {
      const status = segment.generator.status();
      const counts = Object.fromEntries(TAG_STATES.map((s) => [s, 0])) as Record<TagState, number>;
      const attention: NonNullable<Check["attention"]> = [];
      for (const snap of segment.generator.snapshots()) {
        const state = tagState(snap);
        counts[state]++;
        if (state === "refused" || state === "exhausted" || state === "load-failing") {
          if (attention.length < ATTENTION_LIMIT) {
            attention.push({
              tag: snap.tag,
              state,
              reason: snap.refused?.message ?? snap.lastError ?? state,
            });
          }
        }
      }
      const shown = TAG_STATES.filter((s) => counts[s] > 0).map((s) => `${counts[s]} ${s}`);
      checks.segment = {
        ready: status.state === "running",
        detail:
          status.state === "running"
            ? `serving ${status.tags} tag(s) from the ${status.store} store` +
              (shown.length > 0 ? ` (${shown.join(", ")})` : "")
            : `segment generator ${status.state}`,
        tags: counts,
        attention,
      };
    }
  }
  if (ctx.config.snowflake) {
    const worker = services?.snowflake?.worker;
    if (!worker || !running) checks.snowflake = { ready: false, detail: notRunning };
    else {
      checks.snowflake =
        worker.state === "held"
          ? {
              ready: true,
              detail: `worker id ${worker.lease?.workerId} held (${services!.snowflake!.registry.kind} registry, ${registryTarget(ctx)})`,
            }
          : {
              ready: false,
              detail: `lease lost (${worker.state}): no ids until a lease is held again`,
            };
    }
  }
  if (ctx.config.redisSequence) {
    const sequence = services?.redisSequence?.sequence;
    if (!sequence || !running) checks.redisSequence = { ready: false, detail: notRunning };
    else {
      const state = sequence.state();
      checks.redisSequence = {
        ready: state.status === "ready",
        detail:
          state.status === "ready"
            ? "Redis answering"
            : `status ${state.status}${state.redis.lastError ? `: ${state.redis.lastError}` : ""}`,
      };
    }
  }
  return checks;
}

/** True when every enabled mode can serve (what `/health/ready` answers 200 for). */
export function isReady(ctx: AppContext): boolean {
  return Object.values(readiness(ctx)).every((c) => c.ready);
}

/** The registry's address as its entry shows it. */
function registryTarget(ctx: AppContext): string {
  const settings = ctx.config.snowflake!.registry;
  return registryBackend(settings.kind).describe(settings).target;
}
