// The operator's re-formings of a residue set that its rules refuse, on `segment-residue`, while
// the servers run: `leaf-server --form-residue-set` run with the set's databases in another order
// and nothing new (`same-size`), with one of them left out (a removal: `incomplete-set`), or twice
// at once in opposite orders (the set's own order finds nothing to do, the other is refused) with
// the refused list then run again, as an operator retries. Every run's answer is noted; a refused
// list that is accepted breaks the promise `residue-set` (the segment README: a re-forming only
// adds databases, and a database cannot be removed). The servers read the set at start, so one of
// them is then restarted (SIGTERM, start): it must start and serve on the records the runs left.
import type { Cluster, StoreKind } from "../cluster";
import type { Family } from "../families";
import { runFormResidueSet } from "../family-residue";
import { untilAllServe } from "../redis-segment";
import { type Fault, mainServers, NO_ANSWER, processOf } from "./fault";

/** How the operator gets it wrong. */
const VARIANTS = ["reversed", "dropped", "race"] as const;

/** One run of the command: its list and answer. */
interface Run {
  list: StoreKind[];
  code: number | null;
  output: string;
}

/**
 * The part of a run's output worth a note (the refusal, or what was done), each database's name
 * (`127.0.0.1:PORT/DATABASE.leaf_alloc`) replaced by its kind.
 */
function gist(c: Cluster, set: StoreKind[], output: string): string {
  const refusal = /\[leaf\][^;]*(;[^;]*){0,2}/.exec(output)?.[0] ?? output;
  const kinds = new Map(set.map((kind) => [String(c.store(kind).port), kind]));
  return refusal
    .replace(/127\.0\.0\.1:(\d+)\/\S+?\.leaf_alloc/g, (name, port) => kinds.get(port) ?? name)
    .slice(0, 500);
}

/**
 * Judges `run` against the README's rules and notes it: the set's own list must answer that there
 * is nothing to do, any other list of its databases (no new one) must be refused.
 */
function judge(c: Cluster, members: StoreKind[], run: Run, label: string): void {
  const own = run.list.join() === members.join();
  const outcome = run.code === 0 ? "accepted" : `refused (exit ${run.code})`;
  const said = gist(c, members, run.output);
  c.note(`operator ${label}: --form-residue-set [${run.list.join(", ")}] ${outcome}: ${said}`);
  if (own) {
    if (run.code === 0 && !/nothing to do/.test(run.output)) {
      c.breaks("residue-set", `the set's own list re-formed the set: ${said}`);
    }
    return;
  }
  if (run.code === 0) {
    c.breaks(
      "residue-set",
      `[${run.list.join(", ")}] (the set's databases in another order or one left out) accepted: ${said}`,
    );
  }
}

const members = (family: Family): StoreKind[] => family.residue ?? [];

export const residueReform: Fault = {
  name: "residue-reform",
  title:
    "the operator runs --form-residue-set with the set's databases in another order, one left out, or twice at once in opposite orders (the refused list run again); then one server SIGTERMed and restarted after 0.5-4 s",
  targets: (family) => (members(family).length === 2 ? mainServers(family) : []),
  // The databases answer (a run that meets one down is refused for that instead), and the restarted
  // server reaches both, so that a refused restart can only come from the records.
  resources: (target, family) => [
    processOf(target),
    ...members(family).flatMap((store) => [`store:${store}`, `link:${target}~${store}`]),
  ],
  durationMs: [500, 4000],
  params: (rng) => ({ variant: rng.pick(VARIANTS), member: rng.int(0, 1), first: rng.int(0, 1) }),
  async start(c, family, target, params) {
    const server = c.server(target);
    if (!server.running) return false;
    const set = members(family);
    const reversed = [...set].reverse();
    const run = async (list: StoreKind[], file: string): Promise<Run> => ({
      list,
      ...(await runFormResidueSet(c, list, file)),
    });
    if (params.variant === "reversed") {
      judge(c, set, await run(reversed, "reform-reversed.json"), "alone");
    } else if (params.variant === "dropped") {
      const kept = [set[Number(params.member)]!];
      judge(c, set, await run(kept, "reform-dropped.json"), "alone");
    } else {
      // Two operators at once, in opposite orders (the one started first drawn).
      const lists = Number(params.first) === 0 ? [set, reversed] : [reversed, set];
      const runs = await Promise.all(lists.map((list, i) => run(list, `reform-race-${i}.json`)));
      for (const [i, r] of runs.entries()) judge(c, set, r, `at once #${i + 1}`);
      for (const loser of runs.filter((r) => r.code !== 0)) {
        judge(c, set, await run(loser.list, "reform-again.json"), "again");
      }
    }
    // Not awaited: the drain takes up to server.drainMs while the fault is active.
    void server.stop();
    return true;
  },
  async stop(c, family, target) {
    const server = c.server(target);
    if (server.running) await server.stop();
    const fromMs = c.history.now();
    if (!(await c.startServer(target, family.restartAttempts))) {
      c.breaks("residue-set", `${target} refused to start after the operator's runs`);
      return;
    }
    const waiting = await untilAllServe(c, [target], fromMs, 15_000);
    c.note(
      waiting.length === 0
        ? `${target} serves again on the set's records`
        : `${target} served nothing within 15 s of its restart`,
    );
  },
  effects: (family, target) => ({
    // A refused run writes nothing: only the restarted server may fail, as with server-term.
    effects: [
      {
        servers: [target],
        codes: [...NO_ANSWER, "SHUTTING_DOWN", "CLOSED", ...family.storeCodes],
      },
    ],
    settleMs: family.recoveryMs,
  }),
};
