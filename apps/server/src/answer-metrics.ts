// HTTP answers counted and timed with plain numbers on the request path, and rendered as
// Prometheus's http_requests_total counter and http_request_duration_seconds histogram when
// /metrics is read. prom-client's Counter and Histogram check and hash their labels on every call
// (about 2.5 µs per answer together, a tenth of what a single-id request costs the server); here
// a route's counts are found without building a string, and the output has prom-client's shape.
import type { Histogram, Registry } from "prom-client";

/** Upper bounds (seconds) of the duration histogram's buckets. */
export const DURATION_BUCKETS: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/** The labels of one series: method, route pattern (never a raw URL) and status code. */
interface AnswerLabels {
  method: string;
  route: string;
  status_code: string;
}

/** The answers of one method, route and status: how many, their total time and their buckets. */
class AnswerCounts {
  count = 0;
  seconds = 0;
  /** Answers per bucket (not cumulative); one past the last bound counts the slower ones. */
  readonly buckets = new Float64Array(DURATION_BUCKETS.length + 1);

  constructor(readonly labels: AnswerLabels) {}

  add(seconds: number): void {
    this.count++;
    this.seconds += seconds;
    let i = 0;
    while (i < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[i]!) i++;
    this.buckets[i]!++;
  }
}

/** The answers of one route pattern (or `unmatched`), by method and status. */
export class RouteAnswers {
  private readonly byMethod = new Map<string, Map<number, AnswerCounts>>();
  // The series of the last answer: a route answers the same method and status most of the time.
  private lastMethod = "";
  private lastStatus = 0;
  private last: AnswerCounts | undefined;

  constructor(
    readonly route: string,
    private readonly created: (counts: AnswerCounts) => void,
  ) {}

  /** Counts one answer that took `seconds`. */
  add(method: string, status: number, seconds: number): void {
    let counts = this.last;
    if (counts === undefined || status !== this.lastStatus || method !== this.lastMethod) {
      counts = this.countsOf(method, status);
      this.last = counts;
      this.lastMethod = method;
      this.lastStatus = status;
    }
    counts.add(seconds);
  }

  private countsOf(method: string, status: number): AnswerCounts {
    let byStatus = this.byMethod.get(method);
    if (byStatus === undefined) {
      byStatus = new Map();
      this.byMethod.set(method, byStatus);
    }
    let counts = byStatus.get(status);
    if (counts === undefined) {
      counts = new AnswerCounts({ method, route: this.route, status_code: String(status) });
      byStatus.set(status, counts);
      this.created(counts);
    }
    return counts;
  }
}

/** What prom-client's registry reads of a metric (its JSON form, as `Counter.get()` answers). */
interface MetricView {
  name: string;
  help: string;
  type: "counter" | "histogram";
  aggregator: "sum";
  get(): Promise<{
    name: string;
    help: string;
    type: "counter" | "histogram";
    aggregator: "sum";
    values: Array<{ labels: Record<string, string | number>; value: number; metricName?: string }>;
  }>;
  reset(): void;
}

/** Every route's answers, and the two metrics that show them. */
export class HttpAnswers {
  private readonly routes = new Map<string, RouteAnswers>();
  private readonly all: AnswerCounts[] = [];

  /** The answers of `route` (a route pattern, or `unmatched`): find it once, count on it after. */
  route(route: string): RouteAnswers {
    let answers = this.routes.get(route);
    if (answers === undefined) {
      answers = new RouteAnswers(route, (counts) => this.all.push(counts));
      this.routes.set(route, answers);
    }
    return answers;
  }

  /** Registers http_requests_total and http_request_duration_seconds with `registry`. */
  register(registry: Registry): void {
    const all = this.all;
    const reset = () => {
      for (const counts of all) {
        counts.count = 0;
        counts.seconds = 0;
        counts.buckets.fill(0);
      }
    };
    const requests: MetricView = {
      name: "http_requests_total",
      help: "HTTP requests answered, by method, route pattern (not the raw URL; unmatched for 404s) and status code.",
      type: "counter",
      aggregator: "sum",
      async get() {
        const values = all.map((counts) => ({ labels: { ...counts.labels }, value: counts.count }));
        return { name: this.name, help: this.help, type: this.type, aggregator: "sum", values };
      },
      reset,
    };
    const duration: MetricView = {
      name: "http_request_duration_seconds",
      help: "Time from receiving an HTTP request to answering it, by method, route pattern and status code.",
      type: "histogram",
      aggregator: "sum",
      async get() {
        const bucket = `${this.name}_bucket`;
        const values: Awaited<ReturnType<MetricView["get"]>>["values"] = [];
        for (const counts of all) {
          let below = 0;
          for (const [i, le] of DURATION_BUCKETS.entries()) {
            below += counts.buckets[i]!;
            values.push({ labels: { le, ...counts.labels }, value: below, metricName: bucket });
          }
          values.push(
            { labels: { le: "+Inf", ...counts.labels }, value: counts.count, metricName: bucket },
            { labels: { ...counts.labels }, value: counts.seconds, metricName: `${this.name}_sum` },
            { labels: { ...counts.labels }, value: counts.count, metricName: `${this.name}_count` },
          );
        }
        return { name: this.name, help: this.help, type: this.type, aggregator: "sum", values };
      },
      reset,
    };
    // The registry reads a metric through get() (and name, help, type, aggregator, reset) only;
    // its type names prom-client's own classes.
    registry.registerMetric(requests as unknown as Histogram);
    registry.registerMetric(duration as unknown as Histogram);
  }
}
