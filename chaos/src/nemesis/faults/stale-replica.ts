// The check before a stale replica is promoted (replica-promoted, postgres-promoted): every server
// must have taken a range the replica misses, so that its own high-water mark refuses the replica
// after the promotion. A server that took none knows only the max id its last refresh read and
// serves again the ranges the others took after it: the window the server README documents, which
// a promotion would only show again. Then replication resumes and the fault does nothing.
import { marksUntil } from "../../high-water";
import type { Cluster } from "../cluster";

/**
 * Waits (at most 20 s) until each of `labels` keeps a high-water mark of `tag` past `frozen`, the
 * replica's max id. True when all do; otherwise `resume` restarts replication, the servers behind
 * are noted, and false says the promotion is off.
 */
export async function everyServerPast(
  c: Cluster,
  labels: string[],
  tag: string,
  frozen: bigint,
  resume: () => Promise<void>,
): Promise<boolean> {
  const past = (_: string, mark: bigint | undefined) => (mark ?? 0n) > frozen;
  const marks = await marksUntil(labels, (label) => c.server(label), tag, past, 20_000, 250);
  const behind = labels.filter((label) => !past(label, marks.get(label)));
  if (behind.length > 0) {
    await resume();
    c.note(
      `no promotion: ${behind.join(", ")} took no range past ${frozen} within 20 s; replication resumed`,
    );
    return false;
  }
  c.note(`${labels.join(", ")} all took ranges past ${frozen} that the replica misses`);
  return true;
}
