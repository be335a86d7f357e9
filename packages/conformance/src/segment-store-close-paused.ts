// A segment store over a database server, closed while the server is SIGSTOPped with a range and a
// give-back in flight: close() ends while the server is still stopped (every statement has a time
// limit; a pool's end must not wait for a statement the server never answers), the range in flight
// is refused as closed, and a store opened once the server runs again hands out no id twice. Run
// by segment-mysql and segment-postgres with their test kit's pause and resume. Exported from
// `@leaf/conformance/segment-store`.
import type { SegmentRange, SegmentStore } from "@leaf/segment";
import type { PausedOutcome } from "./registry-close-paused";
import { expectTrue, type TestFunction } from "./shared";

/** Options of {@link segmentStoreClosePausedConformance}. */
export interface SegmentStoreClosePausedOptions {
  /** Name shown in front of the test, e.g. "segment-mysql". */
  name: string;
  /** A NEW store on the one shared database, its schema created. */
  create: () => SegmentStore;
  /** Stops the database server (SIGSTOP). */
  pause: () => void;
  /**
   * Waits for `promise` while the server is stopped, up to far past every time limit of the
   * store, then resumes the server (SIGCONT) and waits for the promise in any case (the test kit's
   * `settlesWhilePaused`).
   */
  settleWhilePaused: <T>(promise: Promise<T>) => Promise<PausedOutcome<T>>;
  /**
   * What the give-back in flight may end as (default: refused as closed, unavailable, or given back
   * once the server ran again, since it was sent before the close).
   */
  giveBackOutcomes?: string[];
  /** Time limit of the test in ms (default 120,000). */
  timeoutMs?: number;
}

const STEP = 100;

/** Every id of `ranges`. */
function idsOf(ranges: SegmentRange[]): bigint[] {
  const ids: bigint[] = [];
  for (const r of ranges) for (let id = r.start; id < r.end; id++) ids.push(id);
  return ids;
}

const codeOf = (error: unknown) => String((error as { code?: string }).code ?? error);

/** Registers the close-while-paused test with vitest's `test`. */
export function segmentStoreClosePausedConformance(
  test: TestFunction,
  options: SegmentStoreClosePausedOptions,
): void {
  const giveBackOutcomes = options.giveBackOutcomes ?? ["CLOSED", "UNAVAILABLE", "given back"];
  test(
    `${options.name}: close() ends while the server is stopped with a range and a give-back in flight; a store opened after takes no id twice`,
    async () => {
      const tag = `closepaused${Date.now().toString(36)}`;
      const first = options.create();
      await first.createTag({ tag, step: STEP });
      const handedOut = [await first.takeRange(tag), await first.takeRange(tag)];
      const last = await first.takeRange(tag);
      options.pause();
      // A range and a give-back of the last range's ids, neither answered.
      const inFlight = [
        first.takeRange(tag).then(() => "a range", codeOf),
        (first.giveBack?.(tag, last.start, last.end) ?? Promise.resolve(false)).then(
          (given) => (given ? "given back" : "not given back"),
          codeOf,
        ),
      ];
      await new Promise((resolve) => setTimeout(resolve, 300));
      const { whilePaused, settledAfterMs } = await options.settleWhilePaused(first.close());
      console.log(`${options.name}: closed ${settledAfterMs} ms after the call`);
      expectTrue(whilePaused, `close() took ${settledAfterMs} ms: it waited for the server`);
      const [range, giveBack] = await Promise.all(inFlight);
      expectTrue(range === "CLOSED", `the range in flight ended as ${range}, expected CLOSED`);
      expectTrue(
        giveBackOutcomes.includes(giveBack!),
        `the give-back in flight ended as ${giveBack}, expected one of ${giveBackOutcomes.join(", ")}`,
      );
      // Its ids count as handed out unless they were given back.
      if (giveBack !== "given back") handedOut.push(last);
      const second = options.create();
      try {
        const later: SegmentRange[] = [];
        for (let i = 0; i < 5; i++) later.push(await second.takeRange(tag));
        const seen = new Set(idsOf(handedOut));
        const ids = idsOf(later);
        const twice = ids.filter((id) => seen.has(id)).length;
        expectTrue(ids.length === 5 * STEP, `the second store took ${ids.length} ids`);
        expectTrue(twice === 0, `${twice} ids of the second store were handed out before`);
      } finally {
        await second.close();
      }
    },
    options.timeoutMs ?? 120_000,
  );
}
