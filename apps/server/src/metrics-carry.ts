// The whole server's counters and histograms must never go down (Prometheus reads a decrease as a
// counter reset and counts the whole value again): a worker that restarted starts its counters at
// 0, and a paused or busy worker misses a scrape. The primary keeps each worker's last answer, and
// adds what it saw of ended processes (and the last answer of a worker that did not answer now) to
// the sum. What a process counted after the last scrape before it died is not seen: the sum
// undercounts by that, and never decreases.
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from "prom-client";
import type { WorkerAnswer } from "./cluster-messages";

export type MetricJson = MetricObjectWithValues<MetricValue<string>>;

/** Counters and histograms: what a process adds up over its life. */
function cumulative(metrics: MetricJson[]): MetricJson[] {
  return metrics.filter((m) => String(m.type) === "counter" || String(m.type) === "histogram");
}

export class MetricsCarry {
  /** Each worker slot's last answer: its process and that process's counters then. */
  private readonly last = new Map<number, { pid: number; metrics: MetricJson[] }>();
  /** What ended processes had counted when last seen, summed. */
  private retired: MetricJson[] = [];

  /**
   * Records the workers' `answers` to a metrics gather and returns the parts to sum with them: a
   * worker's last counters where it gave none now, and the ended processes' counters.
   */
  async carry(answers: WorkerAnswer[]): Promise<MetricJson[][]> {
    const ended: MetricJson[][] = [];
    const stale: MetricJson[][] = [];
    for (const answer of answers) {
      if (answer.slot <= 0) continue;
      const seen = this.last.get(answer.slot);
      const fresh = answer.value !== undefined && answer.pid !== undefined;
      if (seen !== undefined && seen.pid !== answer.pid) {
        // Its process ended (and maybe a new one runs): what it counted stays in the sum.
        ended.push(seen.metrics);
        this.last.delete(answer.slot);
      } else if (seen !== undefined && !fresh) {
        stale.push(seen.metrics);
      }
      if (fresh) {
        this.last.set(answer.slot, {
          pid: answer.pid!,
          metrics: cumulative(answer.value as MetricJson[]),
        });
      }
    }
    if (ended.length > 0) {
      this.retired = (await AggregatorRegistry.aggregate([
        this.retired,
        ...ended,
      ]).getMetricsAsJSON()) as MetricJson[];
    }
    return this.retired.length > 0 ? [this.retired, ...stale] : stale;
  }
}
