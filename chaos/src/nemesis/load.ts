// The load: one loop per client, all the time a family runs. HTTP clients ask one server on Java
// Leaf's plain-text paths or the JSON API (single ids and batches); pool clients are @leaf/client
// instances over several servers. Every answer goes to the history.
import type { Agent } from "node:http";
import { isLeafClientError, LeafClient } from "@leaf/client";
import { httpGet, keepAliveAgent, NoAnswer } from "@leaf/testkit";
import { errorCode, errorMessage } from "../load-driver";
import { type Cluster, sleep } from "./cluster";
import type { ClientSpec, Family } from "./families";
import type { History } from "./history";

/** ms between two requests of one client (about 20 a second each). */
const INTERVAL_MS = 50;
/** Largest batch a client asks for. */
const MAX_BATCH = 60;
/**
 * One snowflake request in BIG_EVERY asks for BIG_BATCH ids: more than a tick's 4,096, so the
 * generator uses a tick up and waits for the next one (a synchronous wait a SIGSTOP can land in);
 * at most 10,000 (`server.maxBatch`), so it waits once or twice.
 */
const BIG_EVERY = 100;
const BIG_BATCH: readonly [number, number] = [4097, 10_000];
/** Time limit of one HTTP request, unless the family sets its own (`requestTimeoutMs`). */
const REQUEST_TIMEOUT_MS = 2000;

const ID_TEXT = /^[0-9]{1,19}$/;

/** The load of one family. */
export class NemesisLoad {
  private stopping = false;
  private readonly loops: Array<Promise<void>> = [];
  private readonly clients: LeafClient[] = [];
  private readonly spares: Set<string>;

  constructor(
    private readonly cluster: Cluster,
    private readonly family: Family,
    private readonly history: History,
  ) {
    this.spares = new Set(family.servers.filter((s) => s.spare).map((s) => s.label));
  }

  /** Starts every client (those of spare servers ask only while their server runs). */
  start(): void {
    for (const spec of this.family.clients) {
      this.loops.push(spec.kind === "pool" ? this.pool(spec) : this.http(spec));
    }
  }

  /** Stops every client after its current request. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.loops);
    await Promise.all(this.clients.map((c) => c.close().catch(() => undefined)));
  }

  private async http(spec: ClientSpec): Promise<void> {
    const label = spec.servers[0]!;
    const server = this.cluster.server(label);
    const agent = keepAliveAgent(1);
    let n = 0;
    try {
      while (!this.stopping) {
        if (this.spares.has(label) && !server.running) {
          await sleep(100);
          continue;
        }
        const count =
          spec.mode === "snowflake" && n % BIG_EVERY === BIG_EVERY - 1
            ? bigBatch()
            : n % 4 === 0
              ? 1
              : 2 + Math.floor(Math.random() * (MAX_BATCH - 1));
        n++;
        const ids = await ask(this.cluster, this.history, spec, count, {
          agent,
          timeoutMs: this.family.requestTimeoutMs ?? REQUEST_TIMEOUT_MS,
        });
        await sleep(ids ? INTERVAL_MS : 100);
      }
    } finally {
      agent.destroy();
    }
  }

  private async pool(spec: ClientSpec): Promise<void> {
    const client = new LeafClient({
      servers: spec.servers.map((label) => this.cluster.server(label).url),
      timeoutMs: 3000,
      requestTimeoutMs: 1000,
    });
    this.clients.push(client);
    const source =
      spec.mode === "segment" ? client.segment(spec.tag!) : client.snowflake({ maxAgeMs: 1000 });
    while (!this.stopping) {
      const want = 1 + Math.floor(Math.random() * MAX_BATCH);
      const ids: bigint[] = [];
      let fromMs = this.history.now();
      const base = { client: spec.name, server: "pool", incarnation: 0, mode: spec.mode };
      for (let i = 0; i < want; i++) {
        try {
          ids.push((await source.nextId()) as bigint);
        } catch (error) {
          const toMs = this.history.now();
          if (ids.length > 0) {
            this.history.record(
              { ...base, fromMs, toMs, space: spec.space, ids: ids.length },
              ids,
              false,
            );
            ids.length = 0;
          }
          const code = isLeafClientError(error) ? error.code : "THREW";
          const message = error instanceof Error ? error.message : String(error);
          this.history.record(
            { ...base, fromMs, toMs, space: spec.space, ids: 0, code },
            [],
            false,
            message,
          );
          fromMs = this.history.now();
          if (this.stopping) break;
          await sleep(100);
        }
      }
      if (ids.length > 0) {
        this.history.record(
          { ...base, fromMs, toMs: this.history.now(), space: spec.space, ids: ids.length },
          ids,
          false,
        );
      }
      await sleep(INTERVAL_MS);
    }
  }
}

/** A batch size above one tick's sequence space (4,096), at most 10,000 (server.maxBatch). */
function bigBatch(): number {
  return BIG_BATCH[0] + Math.floor(Math.random() * (BIG_BATCH[1] - BIG_BATCH[0] + 1));
}

/**
 * One request of `count` ids from the server `spec` names; records the answer in the history
 * (ids, or the error code); returns its ids, if it held any. Faults that send load of their own use
 * it too, so their answers are checked like the clients'.
 */
export async function ask(
  cluster: Cluster,
  history: History,
  spec: ClientSpec,
  count: number,
  options: { agent?: Agent; timeoutMs: number },
): Promise<bigint[] | undefined> {
  const server = cluster.server(spec.servers[0]!);
  const incarnation = server.incarnation;
  const fromMs = history.now();
  let ids: bigint[] | undefined;
  let code: string | undefined;
  let message = "";
  try {
    const answer = await httpGet(server.port, path(spec, count), options);
    if (answer.status === 200) {
      ids = parse(spec, answer.body);
      if (ids === undefined || ids.length !== count) {
        code = "MALFORMED";
        message = answer.body.slice(0, 200);
        ids = undefined;
      }
    } else {
      code = errorCode(answer.status, answer.body).split(" ")[1];
      message = errorMessage(answer.body);
    }
  } catch (error) {
    if (!(error instanceof NoAnswer)) throw error;
    code = error.code;
    message = error.message;
  }
  const base = {
    client: spec.name,
    server: server.label,
    incarnation,
    fromMs,
    toMs: history.now(),
    mode: spec.mode,
    space: spec.space,
  };
  const increasing =
    spec.increasing && spec.residueClasses !== undefined
      ? { classes: spec.residueClasses }
      : spec.increasing;
  if (ids) history.record({ ...base, ids: ids.length }, ids, increasing);
  else history.record({ ...base, ids: 0, code }, [], false, message);
  return ids;
}

function path(spec: ClientSpec, count: number): string {
  const batch = count > 1;
  switch (spec.mode) {
    case "segment": {
      const tag = encodeURIComponent(spec.tag!);
      if (spec.kind === "java") return `/api/segment/get/${tag}${batch ? `?count=${count}` : ""}`;
      return batch ? `/api/v1/segment/${tag}/ids?count=${count}` : `/api/v1/segment/${tag}/id`;
    }
    case "snowflake":
      if (spec.kind === "java") return `/api/snowflake/get/nem${batch ? `?count=${count}` : ""}`;
      return batch ? `/api/v1/snowflake/ids?count=${count}` : "/api/v1/snowflake/id";
    case "redisSequence":
      return batch
        ? `/api/v1/redis-sequence/ids?shard=${spec.shard}&count=${count}`
        : `/api/v1/redis-sequence/id?shard=${spec.shard}`;
  }
}

/** Ids of a 200 answer: plain text (one per line) on Java Leaf's paths, JSON elsewhere. */
function parse(spec: ClientSpec, body: string): bigint[] | undefined {
  let texts: unknown[];
  if (spec.kind === "java") {
    texts = body.split("\n").filter((line) => line !== "");
  } else {
    const json = JSON.parse(body) as { id?: unknown; ids?: unknown };
    texts = Array.isArray(json.ids) ? json.ids : [json.id];
  }
  const ids: bigint[] = [];
  for (const text of texts) {
    if (typeof text !== "string" || !ID_TEXT.test(text)) return undefined;
    const id = BigInt(text);
    if (id > 0x7fffffffffffffffn) return undefined;
    ids.push(id);
  }
  return ids;
}
