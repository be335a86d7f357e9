// The embedded store with several worker processes (server.workers): its folder is one process's,
// so the primary process opens it and each worker takes its ranges from it over IPC. The worker's
// side is a SegmentStore that forwards every call; the primary's side runs them on the one store,
// whose ranges are disjoint as they are for one process, and lets a worker process give back only
// ids of its own last ranges.
import { ErrorCodes, LeafError } from "@leaf/core";
import type { NewTag, SegmentRange, SegmentStore, TagRecord } from "@leaf/segment";
import type { StoreOp } from "./cluster-messages";

const COMPONENT = "server";

/** Sends one store operation to the primary and resolves with its answer (or its error). */
export type StoreCall = (op: StoreOp, args: unknown[]) => Promise<unknown>;

/**
 * A worker's view of the primary's store: every call is sent to the primary. Closing it closes
 * nothing there (the other workers still use the store); later calls reject with CLOSED.
 */
export class RemoteSegmentStore implements SegmentStore {
  private closed = false;

  constructor(
    readonly kind: string,
    private readonly call: StoreCall,
  ) {}

  listTags(): Promise<string[]> {
    return this.send("listTags", []) as Promise<string[]>;
  }

  describeTags(): Promise<TagRecord[]> {
    return this.send("describeTags", []) as Promise<TagRecord[]>;
  }

  takeRange(tag: string, step?: number, floor?: bigint): Promise<SegmentRange> {
    return this.send("takeRange", [tag, step, floor]) as Promise<SegmentRange>;
  }

  createTag(tag: NewTag): Promise<TagRecord> {
    return this.send("createTag", [tag]) as Promise<TagRecord>;
  }

  updateStep(tag: string, step: number): Promise<TagRecord> {
    return this.send("updateStep", [tag, step]) as Promise<TagRecord>;
  }

  deleteTag(tag: string): Promise<TagRecord | undefined> {
    return this.send("deleteTag", [tag]) as Promise<TagRecord | undefined>;
  }

  giveBack(tag: string, from: bigint, end: bigint): Promise<boolean> {
    return this.send("giveBack", [tag, from, end]) as Promise<boolean>;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private async send(op: StoreOp, args: unknown[]): Promise<unknown> {
    if (this.closed) {
      throw new LeafError({
        component: COMPONENT,
        code: ErrorCodes.CLOSED,
        message: `the ${this.kind} store of this worker process is closed`,
      });
    }
    return this.call(op, args);
  }
}

/**
 * The primary's side: runs the workers' calls on the store it opened. Per worker process it keeps,
 * per tag, the run of ranges that process took back to back; a give-back must end where that run
 * ends and start inside it (a process gives back only ids it took and never handed out), otherwise
 * INVALID_ARGUMENT and nothing changes. A process that died takes its runs with it: its ranges are
 * a gap, never given back by the process that replaces it.
 */
export class StoreHost {
  private readonly runs = new Map<string, { start: bigint; end: bigint }>();

  constructor(readonly store: SegmentStore) {}

  /** Runs `op` for worker process `processId` (cluster's worker id, never reused). */
  async run(processId: number, op: StoreOp, args: unknown[]): Promise<unknown> {
    const store = this.store;
    switch (op) {
      case "listTags":
        return store.listTags();
      case "describeTags":
        return store.describeTags();
      case "takeRange": {
        const [tag, step, floor] = args as [string, number | undefined, bigint | undefined];
        const range = await store.takeRange(tag, step, floor);
        const key = runKey(processId, tag);
        const run = this.runs.get(key);
        if (run !== undefined && run.end === range.start) run.end = range.end;
        else this.runs.set(key, { start: range.start, end: range.end });
        return range;
      }
      case "createTag":
        return store.createTag(args[0] as NewTag);
      case "updateStep":
        return store.updateStep(args[0] as string, args[1] as number);
      case "deleteTag":
        return store.deleteTag(args[0] as string);
      case "giveBack": {
        const [tag, from, end] = args as [string, bigint, bigint];
        const run = this.runs.get(runKey(processId, tag));
        if (run === undefined || end !== run.end || from < run.start || from > end) {
          throw new LeafError({
            component: COMPONENT,
            code: ErrorCodes.INVALID_ARGUMENT,
            message:
              `a worker process asked to give back ids [${from}, ${end}) of tag ${JSON.stringify(tag)}, which are not ` +
              (run === undefined
                ? "of any range it took"
                : `the end of its last ranges [${run.start}, ${run.end})`) +
              "; nothing was given back",
            details: { tag, from: from.toString(), end: end.toString() },
          });
        }
        if (store.giveBack === undefined) return false;
        const given = await store.giveBack(tag, from, end);
        if (given) run.end = from;
        return given;
      }
    }
  }

  /** Forgets the runs of a process that ended. */
  forget(processId: number): void {
    const prefix = `${processId}\u0000`;
    for (const key of this.runs.keys()) if (key.startsWith(prefix)) this.runs.delete(key);
  }
}

function runKey(processId: number, tag: string): string {
  return `${processId}\u0000${tag}`;
}
