// The history of a nemesis run: every answer any client got (who asked, which server answered,
// when, in which id space, how many ids or which error code), the ids themselves per space with the
// answer each came in, and the events (faults started and stopped, servers refused at start).

/** The modes a client asks. */
export type Mode = "segment" | "snowflake" | "redisSequence";

/** One answer (one request, or one batch taken from a @leaf/client). */
export interface Answer {
  /** The client: "A java segment", "client-1 segment". */
  client: string;
  /** The server that answered ("A"), or "pool" for a @leaf/client over every server. */
  server: string;
  /** Which start of that server (1 = first); 0 for a pool. */
  incarnation: number;
  /** ms since the run began: request sent, answer received. */
  fromMs: number;
  toMs: number;
  mode: Mode;
  space: string;
  /** Ids received (0 on failure). */
  ids: number;
  /** The failure: "LEASE_LOST", "ECONNREFUSED", "TIMEOUT", "client UNAVAILABLE"... */
  code?: string;
}

/** Something the nemesis did or saw, in time order. */
export interface HistoryEvent {
  atMs: number;
  text: string;
}

/** The ids of one space with, for each, the index of the answer it came in. */
class SpaceIds {
  ids = new BigInt64Array(1 << 14);
  answers = new Int32Array(1 << 14);
  size = 0;

  push(ids: readonly bigint[], answer: number): void {
    if (this.size + ids.length > this.ids.length) {
      let capacity = this.ids.length * 2;
      while (capacity < this.size + ids.length) capacity *= 2;
      const grownIds = new BigInt64Array(capacity);
      grownIds.set(this.ids.subarray(0, this.size));
      const grownAnswers = new Int32Array(capacity);
      grownAnswers.set(this.answers.subarray(0, this.size));
      this.ids = grownIds;
      this.answers = grownAnswers;
    }
    for (const id of ids) {
      this.answers[this.size] = answer;
      this.ids[this.size++] = id;
    }
  }
}

/** An id that went backwards within one client's answers from one server process. */
export interface Decrease {
  client: string;
  server: string;
  incarnation: number;
  previous: bigint;
  id: bigint;
  answer: number;
}

/** Everything a run saw. */
export class History {
  readonly answers: Answer[] = [];
  readonly events: HistoryEvent[] = [];
  /** One message per client and code, for the report. */
  readonly messages = new Map<string, string>();
  readonly decreases: Decrease[] = [];
  private readonly spaces = new Map<string, SpaceIds>();
  private readonly lastIds = new Map<string, bigint>();
  private t0 = performance.now();
  private hr0 = process.hrtime.bigint();
  /** The nemesis's wall clock (epoch ms) when the run began: snowflake ids are dated against it. */
  wallMs0 = Date.now();

  /** ms since the run began (the load started; events before it are negative). */
  now(): number {
    return performance.now() - this.t0;
  }

  /** Starts the run's clock now (call as the load starts): schedule times count from here. */
  begin(): void {
    const shift = performance.now() - this.t0;
    for (const e of this.events) e.atMs -= Math.round(shift);
    this.t0 = performance.now();
    this.hr0 = process.hrtime.bigint();
    this.wallMs0 = Date.now();
  }

  /** ms since the run began of a CLOCK_MONOTONIC reading (process.hrtime) of any process here. */
  msAtHr(hr: bigint): number {
    return Number(hr - this.hr0) / 1e6;
  }

  /** Notes an event (and returns its text, for the log). */
  event(text: string): string {
    this.events.push({ atMs: Math.round(this.now()), text });
    return text;
  }

  /**
   * Records an answer with its ids. `increasing`: ids from one server process to one client must go
   * up (the README promises it for segment ids and for snowflake ids without backup worker ids);
   * `{ classes: N }`: within each residue class `id % N` only (a residue set's databases).
   */
  record(
    answer: Answer,
    ids: readonly bigint[],
    increasing: boolean | { classes: number },
    message?: string,
  ): void {
    const index = this.answers.length;
    this.answers.push(answer);
    if (answer.code !== undefined) {
      const key = `${answer.client} ${answer.code}`;
      if (message && !this.messages.has(key)) this.messages.set(key, message.slice(0, 300));
      return;
    }
    let space = this.spaces.get(answer.space);
    if (!space) {
      space = new SpaceIds();
      this.spaces.set(answer.space, space);
    }
    space.push(ids, index);
    if (!increasing) return;
    const classes = increasing === true ? 1n : BigInt(increasing.classes);
    const key = `${answer.client}\u0000${answer.server}\u0000${answer.incarnation}`;
    for (const id of ids) {
      const classKey = classes === 1n ? key : `${key}\u0000${id % classes}`;
      const last = this.lastIds.get(classKey);
      if (last !== undefined && id <= last) {
        this.decreases.push({
          client: answer.client,
          server: answer.server,
          incarnation: answer.incarnation,
          previous: last,
          id,
          answer: index,
        });
      }
      this.lastIds.set(classKey, id);
    }
  }

  /** Names of the spaces that got ids. */
  spaceNames(): string[] {
    return [...this.spaces.keys()].sort();
  }

  /** The ids of `space` (in arrival order) and the answer index of each. */
  idsOf(space: string): { ids: BigInt64Array; answers: Int32Array } {
    const s = this.spaces.get(space);
    if (!s) return { ids: new BigInt64Array(0), answers: new Int32Array(0) };
    return { ids: s.ids.subarray(0, s.size), answers: s.answers.subarray(0, s.size) };
  }

  /** Ids received in all spaces. */
  totalIds(): number {
    let n = 0;
    for (const s of this.spaces.values()) n += s.size;
    return n;
  }
}
