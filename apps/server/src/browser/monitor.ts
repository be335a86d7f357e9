// The monitor page's script, bundled into the page (monitor-script.ts, build/browser-script.ts):
// polls /api/v1/monitor every second and the store's rows every five, and builds the DOM with
// textContent only (a tag name can never inject markup).
import type { MonitorState, StoreRow } from "../monitor-state";

type Segment = MonitorState["segment"];
type RunningSegment = Extract<Segment, { running: true }>;
type TagView = RunningSegment["tags"][number];
type Range = TagView["segments"][number];
type Activity = MonitorState["activity"];
type ActivityRow = Activity["tags"][number];
type Capacity = MonitorState["capacity"];
type TagCapacity = Capacity["tags"][number];
type Snowflake = MonitorState["snowflake"];
type RedisSequence = MonitorState["redisSequence"];
type Workers = MonitorState["workers"];

/** Attributes of `el`: text and cls set textContent and className, the others are attributes. */
type Attrs = Record<string, string>;
/** One line of a sparkline: its values and its CSS class. */
type Series = { values: number[]; cls: string };

const REFRESH_MS = 1000;
const STORE_REFRESH_MS = 5000;
let lastStoreFetch = 0;
let receivedAt = Date.now();

function byId(id: string): HTMLElement {
  const node = document.getElementById(id);
  if (!node) throw new Error(`the monitor page has no element #${id}`);
  return node;
}

function el(tag: string, attrs?: Attrs | null, children?: (Node | null)[]): HTMLElement {
  const node = document.createElement(tag);
  if (attrs)
    for (const k in attrs) {
      const value = attrs[k] as string;
      if (k === "text") node.textContent = value;
      else if (k === "cls") node.className = value;
      else node.setAttribute(k, value);
    }
  for (const c of children || []) if (c) node.appendChild(c);
  return node;
}
function replace(id: string, nodes: Node[]): void {
  const host = byId(id);
  host.textContent = "";
  for (const n of nodes) host.appendChild(n);
}
function num(s: string | number | null | undefined): string {
  if (s === null || s === undefined) return "";
  let str = String(s);
  const neg = str.charAt(0) === "-";
  if (neg) str = str.slice(1);
  let out = "";
  while (str.length > 3) {
    out = `,${str.slice(-3)}${out}`;
    str = str.slice(0, -3);
  }
  return (neg ? "-" : "") + str + out;
}
function big(s: string): bigint {
  try {
    return BigInt(s);
  } catch {
    return 0n;
  }
}
// The page's one time format: yyyy-MM-dd HH:mm:ss.SSS in UTC (the header says so). Takes ms since
// 1970 or an ISO text (the store's rows).
function clock(ms: number | string | null | undefined): string {
  if (!ms) return "never";
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
}
function rate(n: number): string {
  if (n >= 100) return num(String(Math.round(n)));
  if (n >= 10) return n.toFixed(1);
  return n === 0 ? "0" : n.toFixed(2);
}
function span(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "idle";
  const y = seconds / (365.25 * 86400);
  if (y >= 1) return `${y >= 1000 ? num(String(Math.round(y))) : y.toFixed(1)} years`;
  if (seconds >= 86400) return `${Math.floor(seconds / 86400)} days`;
  return duration(seconds * 1000);
}
const SVG = "http://www.w3.org/2000/svg";
// A sparkline of one or more series (same scale), as an inline SVG.
function spark(series: Series[], width: number, height: number, testid?: string): SVGSVGElement {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", String(width));
  svg.setAttribute("height", String(height));
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  if (testid) svg.setAttribute("data-testid", testid);
  let max = 1;
  for (const s of series) for (const v of s.values) if (v > max) max = v;
  for (const s of series) {
    const n = s.values.length;
    const pts: string[] = [];
    for (let i = 0; i < n; i++) {
      const x = n === 1 ? 0 : (i * width) / (n - 1);
      const y = height - 1 - ((s.values[i] as number) / max) * (height - 2);
      pts.push(`${x.toFixed(1)},${y.toFixed(1)}`);
    }
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("class", s.cls);
    line.setAttribute("points", pts.join(" "));
    line.setAttribute("data-max", String(Math.max(...s.values, 0)));
    svg.appendChild(line);
  }
  return svg;
}
function ago(ms: number | null | undefined, now: number): string {
  if (!ms) return "never";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return `${Math.floor(s / 3600)} h ago`;
}
function duration(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}
function chip(text: string, cls: string, testid?: string): HTMLElement {
  const attrs: Attrs = { cls: `chip ${cls}`, text };
  if (testid) attrs["data-testid"] = testid;
  return el("span", attrs);
}
function tile(key: string, value: string, sub?: string | null, testid?: string): HTMLElement {
  // Long values (times, big numbers) in a smaller font, so that a tile never wraps them.
  const v = el("div", { cls: value.length > 14 ? "v long" : "v", text: value });
  if (testid) v.setAttribute("data-testid", testid);
  return el("div", { cls: "tile" }, [
    el("div", { cls: "k", text: key }),
    v,
    sub ? el("div", { cls: "s", text: sub }) : null,
  ]);
}
function disabled(id: string, text: string): void {
  replace(id, [el("p", { cls: "empty", text })]);
}
function headRow(titles: string[]): HTMLElement {
  return el(
    "tr",
    {},
    titles.map((h) => el("th", { text: h })),
  );
}

function rangeRow(index: number, range: Range, isCurrent: boolean, snap: TagView): HTMLElement {
  let label: string;
  let cls: string;
  if (isCurrent) {
    label = "current";
    cls = "ok";
  } else if (range) {
    label = "next ready";
    cls = "info";
  } else if (snap.loading) {
    label = "loading";
    cls = "warn";
  } else {
    label = "not loaded";
    cls = "off";
  }
  const name = el("div", { cls: "name" }, [
    el("div", { text: `Segment ${index}` }),
    chip(label, cls, "range-state"),
  ]);
  const bar = el("div", { cls: `bar${isCurrent ? "" : " next"}`, "data-testid": "bar" });
  let numbers: HTMLElement;
  if (range) {
    const left = big(range.max) - big(range.value);
    const step = range.step > 0 ? range.step : 1;
    let pct = Number((left * 10000n) / BigInt(step)) / 100;
    if (pct < 0) pct = 0;
    if (pct > 100) pct = 100;
    bar.setAttribute("data-fill", pct.toFixed(2));
    const fill = el("div", { cls: "fill" });
    fill.style.width = `${pct.toFixed(2)}%`;
    bar.appendChild(fill);
    bar.appendChild(
      el("div", { cls: "label", text: `${num(left.toString())} left (${pct.toFixed(1)}%)` }),
    );
    numbers = el("div", {
      cls: "numbers",
      "data-testid": "range-numbers",
      text: `value ${num(range.value)} · max ${num(range.max)} · step ${num(range.step)}`,
    });
  } else {
    bar.setAttribute("data-fill", "0");
    bar.appendChild(el("div", { cls: "label", text: "empty" }));
    numbers = el("div", { cls: "numbers", text: "no range" });
  }
  return el("div", { cls: "range", "data-testid": `range-${index}` }, [name, bar, numbers]);
}

// Activity and capacity rows of the last answer, by tag, for the tag cards.
let tagActivity: Record<string, ActivityRow> = {};
let tagCapacity: Record<string, TagCapacity> = {};

function modeName(mode: string): string {
  return mode === "segment"
    ? "Segment"
    : mode === "snowflake"
      ? "Snowflake"
      : mode === "redisSequence"
        ? "Redis sequence"
        : mode;
}

function legend(): HTMLElement {
  return el("div", { cls: "legend" }, [
    el("b", { style: "background: var(--bar)" }),
    el("span", { text: "ids/s" }),
    el("b", { style: "background: var(--amber)" }),
    el("span", { text: "requests/s" }),
  ]);
}

function renderActivity(act: Activity, data: MonitorState): void {
  byId("activity-sub").textContent =
    `ids and requests per second, now (last ${act.rateSeconds} s) and over the last ${act.sparklineSeconds / 60} minutes`;
  tagActivity = {};
  for (const t of act.tags) tagActivity[`${t.mode}\u0000${t.tag}`] = t;
  const enabled: string[] = [];
  if (data.segment.enabled) enabled.push("segment");
  if (data.snowflake.enabled) enabled.push("snowflake");
  if (data.redisSequence.enabled) enabled.push("redisSequence");
  const byMode: Record<string, ActivityRow> = {};
  for (const m of act.modes) byMode[m.mode] = m;
  if (enabled.length === 0) {
    replace("activity-modes", [el("p", { cls: "empty", text: "No mode is enabled." })]);
    return;
  }
  replace(
    "activity-modes",
    enabled.map((mode) => {
      const m = byMode[mode] || { idsPerSecond: 0, requestsPerSecond: 0, ids: [], requests: [] };
      const v = el("div", {
        cls: "v",
        "data-testid": "ids-rate",
        text: `${rate(m.idsPerSecond)} ids/s`,
      });
      return el("div", { cls: "tile", "data-testid": "mode-activity", "data-mode": mode }, [
        el("div", { cls: "k", text: modeName(mode) }),
        v,
        el("div", {
          cls: "s",
          "data-testid": "requests-rate",
          text: `${rate(m.requestsPerSecond)} requests/s`,
        }),
        spark(
          [
            { values: m.requests, cls: "req" },
            { values: m.ids, cls: "ids" },
          ],
          180,
          34,
          "mode-spark",
        ),
        legend(),
      ]);
    }),
  );
}

function renderErrors(act: Activity): void {
  const minutes = act.errorWindowSeconds / 60;
  byId("errors-sub").textContent = `answers with an error code in the last ${minutes} minutes`;
  if (act.errors.length === 0) {
    replace("errors-table", [
      el("p", {
        cls: "empty",
        "data-testid": "no-errors",
        text: `No errors in the last ${minutes} minutes.`,
      }),
    ]);
    return;
  }
  const head = headRow(["code", "mode", "count", "last", `last ${act.sparklineSeconds / 60} min`]);
  const body = act.errors.map((e) => {
    const bad =
      e.code.indexOf("HTTP 5") === 0 ||
      /UNAVAILABLE|EXHAUSTED|CLOCK|LEASE|CORRUPT|INTERNAL/.test(e.code);
    return el("tr", { "data-testid": "error-row", "data-code": e.code }, [
      el("td", {}, [chip(e.code, bad ? "bad" : "warn")]),
      el("td", { text: e.mode ? modeName(e.mode) : "other endpoints" }),
      el("td", { "data-testid": "error-count", text: num(String(e.count)) }),
      el("td", { text: clock(e.lastAt) }),
      el("td", {}, [spark([{ values: e.history, cls: "err" }], 160, 22)]),
    ]);
  });
  replace("errors-table", [el("table", {}, [el("thead", {}, [head]), el("tbody", {}, body)])]);
}

/** The worker processes of a server that runs several (server.workers); hidden for one. */
function renderWorkers(workers: Workers): void {
  const section = byId("workers");
  section.hidden = workers === null;
  if (workers === null) return;
  byId("workers-sub").textContent =
    `${workers.count} processes share the port, each with its own ids · this page is answered by worker ${workers.answeredBy}` +
    (workers.stopping ? " · stopping" : "");
  const head = headRow([
    "worker",
    "pid",
    "state",
    "worker id",
    "node",
    "ranges",
    "ids/s",
    "requests/s",
    "restarts",
    "last exit",
  ]);
  const body = workers.list.map((w) => {
    const s = w.summary;
    const state = s
      ? chip(s.ready ? "ready" : s.state, s.ready ? "ok" : "warn")
      : chip(w.missing ?? w.state, w.state === "running" ? "bad" : "warn");
    const exit = w.lastExit
      ? `${w.lastExit.signal ?? `code ${w.lastExit.code}`} at ${clock(w.lastExit.at)}`
      : "";
    return el("tr", { "data-testid": "worker-row", "data-worker": String(w.slot) }, [
      el("td", { text: String(w.slot) }),
      el("td", { text: w.pid === undefined ? "" : String(w.pid) }),
      el("td", {}, [state]),
      el("td", { text: s?.workerId == null ? "" : String(s.workerId) }),
      el("td", { text: s?.node ?? "" }),
      el("td", { text: s?.ranges == null ? "" : num(String(s.ranges)) }),
      el("td", { text: s ? rate(s.idsPerSecond) : "" }),
      el("td", { text: s ? rate(s.requestsPerSecond) : "" }),
      el("td", { text: String(w.restarts) }),
      el("td", { text: exit }),
    ]);
  });
  replace("workers-table", [el("table", {}, [el("thead", {}, [head]), el("tbody", {}, body)])]);
}

function renderCapacity(cap: Capacity): void {
  byId("capacity-sub").textContent =
    `warned when fewer than ${cap.thresholds.years} years are left, or fewer than ${Math.round(cap.thresholds.workerFraction * 100)}% of the worker ids`;
  replace(
    "capacity-warnings",
    cap.warnings.map((w) =>
      el("li", {
        "data-testid": "capacity-warning",
        "data-subject": w.subject,
        text: w.message.replace(/^\[leaf\] \[server\] capacity: /, ""),
      }),
    ),
  );
  const tiles: HTMLElement[] = [];
  if (cap.layout) {
    tiles.push(
      tile(
        "Snowflake layout runs out",
        clock(cap.layout.lastInstantMs).slice(0, 10),
        `${clock(cap.layout.lastInstantMs)} · in ${span(cap.layout.secondsLeft)} · layout ${cap.layout.name}`,
        "layout-end",
      ),
    );
  }
  if (cap.workerIds) {
    const w = cap.workerIds;
    const space = num(String(w.space));
    tiles.push(
      tile(
        "Worker ids left",
        w.left === null
          ? w.reused
            ? "recycled"
            : "set by hand"
          : `${num(String(w.left))} of ${space}`,
        w.left === null
          ? w.reused
            ? `${w.registry} ${w.mode} mode: ids come back when nodes stop; ${space} in the space`
            : `local registry: ids are configured per node; ${space} in the space`
          : `${w.registry} ${w.mode} mode never gives an id back; this node holds ${w.highestHeld}`,
        "worker-ids-left",
      ),
    );
  }
  replace("capacity-tiles", tiles);
  tagCapacity = {};
  for (const t of cap.tags) tagCapacity[t.tag] = t;
  if (cap.tags.length === 0) {
    replace("capacity-tags", []);
    return;
  }
  const head = headRow([
    "tag",
    "max_id",
    "headroom below 2^63 - 1",
    "at the current rate it lasts",
    "days",
  ]);
  const rows = cap.tags.map((t) =>
    el("tr", { "data-testid": "headroom-row", "data-tag": t.tag }, [
      el("td", { text: t.tag }),
      el("td", { text: num(t.maxId) }),
      el("td", { text: num(t.headroom) }),
      el("td", {
        "data-testid": "headroom-time",
        text: t.usedUp
          ? "used up"
          : t.headroomYears === null
            ? "idle"
            : span(t.headroomYears * 365.25 * 86400),
      }),
      el("td", {
        "data-testid": "headroom-days",
        text: t.headroomDays === null ? "" : num(String(Math.floor(t.headroomDays))),
      }),
    ]),
  );
  replace("capacity-tags", [el("table", {}, [el("thead", {}, [head]), el("tbody", {}, rows)])]);
}

function tagStateChip(t: TagView): HTMLElement {
  if (t.state === "exhausted") return chip("used up", "bad", "tag-state");
  if (t.state === "refused") return chip("refused", "bad", "tag-state");
  if (t.state === "load-failing") return chip("load failing", "bad", "tag-state");
  if (t.state === "lazy") return chip("loads on first request", "off", "tag-state");
  if (t.state === "loading") return chip("loading", "warn", "tag-state");
  if (t.nextReady) return chip("next ready", "ok", "tag-state");
  if (t.loading) return chip("loading next", "info", "tag-state");
  return chip("ready", "ok", "tag-state");
}

function tagCard(t: TagView): HTMLElement {
  const title = el("h3", {}, [
    el("span", { text: t.tag, "data-testid": "tag-name" }),
    tagStateChip(t),
  ]);
  const ranges = [0, 1].map((i) =>
    rangeRow(i, t.segments[i] ?? null, t.initialized && t.currentPos === i, t),
  );
  const foot = el("div", {
    cls: "foot",
    "data-testid": "tag-foot",
    text:
      `last load ${clock(t.lastLoadAt)}` +
      (t.lastLoadDurationMs !== null ? ` (${t.lastLoadDurationMs.toFixed(1)} ms)` : "") +
      ` · ${num(t.loads)} loads · ${num(t.loadFailures)} failures · step ${num(t.step)}` +
      ` (table ${num(t.tableStep)}) · ${num(t.idsLeft)} ids left`,
  });
  const a = tagActivity[`segment\u0000${t.tag}`];
  const c = tagCapacity[t.tag];
  const motion = el("div", {
    cls: "rate",
    "data-testid": "tag-rate",
    text:
      `${a ? rate(a.idsPerSecond) : "0"} ids/s · ${a ? rate(a.requestsPerSecond) : "0"} requests/s` +
      ` · both ranges last ${c && c.bufferSecondsLeft !== null ? span(c.bufferSecondsLeft) : "(idle)"}` +
      " at the last minute's rate",
  });
  if (a)
    motion.appendChild(
      spark(
        [
          { values: a.requests, cls: "req" },
          { values: a.ids, cls: "ids" },
        ],
        380,
        30,
        "tag-spark",
      ),
    );
  const children = [title, motion, ...ranges, foot];
  if (t.refused)
    children.push(
      el("div", { cls: "error", "data-testid": "tag-refused", text: t.refused.message }),
    );
  else if (t.lastError && t.consecutiveFailures > 0)
    children.push(el("div", { cls: "error", text: t.lastError }));
  return el("div", { cls: "card", "data-testid": "tag", "data-tag": t.tag }, children);
}

/** "normal mode, zk1:2181": a registry's mode and address as its backend entry describes them. */
function registryWhere(backend: { mode: string; target: string }): string {
  return backend.mode === "" ? backend.target : `${backend.mode} mode, ${backend.target}`;
}

function renderSegment(seg: Segment, now: number): void {
  const sub = byId("segment-sub");
  if (!seg.enabled) {
    sub.textContent = "";
    disabled("segment-tags", "Segment mode is disabled on this server.");
    return;
  }
  if (!seg.running) {
    sub.textContent = `${seg.store} store (${seg.backend.target})`;
    disabled("segment-tags", "Starting...");
    return;
  }
  const health = seg.storeHealth;
  sub.textContent = "";
  if (health) {
    sub.appendChild(
      chip(
        health.state === "down"
          ? "database down"
          : health.state === "up"
            ? "database up"
            : "database not used yet",
        health.state === "down" ? "bad" : health.state === "up" ? "ok" : "off",
        "store-health",
      ),
    );
    sub.appendChild(document.createTextNode(" "));
  }
  sub.appendChild(
    document.createTextNode(
      `${seg.store} store (${seg.backend.target}) · ${seg.tags.length} tag${seg.tags.length === 1 ? "" : "s"}` +
        ` · tag list read ${ago(seg.status.lastRefreshAt, now)}` +
        (seg.status.lastRefreshError
          ? ` · last refresh failed: ${seg.status.lastRefreshError}`
          : "") +
        (health && health.state === "down"
          ? ` · last failure ${clock(health.lastFailureAt)}: ${health.lastFailure}`
          : ""),
    ),
  );
  if (seg.tags.length === 0) {
    disabled("segment-tags", "No tags in the store.");
    return;
  }
  replace("segment-tags", seg.tags.map(tagCard));
}

function renderStore(rows: StoreRow[] | null | undefined): void {
  if (!rows) return;
  if (rows.length === 0) {
    replace("store-table", [el("p", { cls: "empty", text: "The store holds no tags." })]);
    return;
  }
  const head = headRow(["tag", "max_id", "step", "description", "updated"]);
  const body = rows.map((r) =>
    el("tr", { "data-testid": "store-row" }, [
      el("td", { text: r.tag }),
      el("td", { text: num(r.maxId) }),
      el("td", { text: num(r.step) }),
      el("td", { text: r.description || "" }),
      el("td", { text: r.updatedAt ? clock(r.updatedAt) : "" }),
    ]),
  );
  replace("store-table", [el("table", {}, [el("thead", {}, [head]), el("tbody", {}, body)])]);
}

function renderSnowflake(sf: Snowflake, now: number): void {
  const serverNow = now;
  const sub = byId("snowflake-sub");
  if (!sf.enabled) {
    sub.textContent = "";
    disabled("snowflake-body", "Snowflake mode is disabled on this server.");
    return;
  }
  if (!sf.running) {
    sub.textContent = `${sf.registry} registry (${registryWhere(sf.backend)})`;
    disabled("snowflake-body", "Starting...");
    return;
  }
  const layout = sf.layout;
  sub.textContent =
    `${sf.registry} registry (${registryWhere(sf.backend)}) · node ${sf.node.ip}:${sf.node.port} · layout ${layout.name}` +
    ` (${layout.timestampBits}/${layout.workerBits}/${layout.sequenceBits}, epoch ${clock(layout.epoch)})`;
  const leaseCls = sf.state === "held" ? "ok" : sf.state === "fenced" ? "bad" : "off";
  const leaseTile = el("div", { cls: "tile" }, [
    el("div", { cls: "k", text: "Lease" }),
    el("div", { cls: "v" }, [chip(sf.state, leaseCls, "lease-state")]),
    el("div", { cls: "s", text: `last report ${ago(sf.lastReportAt, now)}` }),
  ]);
  const offset =
    sf.clockOffsetMs === null
      ? "no id yet"
      : `${sf.clockOffsetMs >= 0 ? "+" : ""}${num(sf.clockOffsetMs)} ms`;
  let offsetNote =
    sf.clockOffsetMs === null
      ? ""
      : sf.clockOffsetMs >= 0
        ? "clock ahead of the last id: safe"
        : "clock BEHIND the last id: ids wait or are refused";
  const browserSkew = Math.round(receivedAt - serverNow);
  offsetNote += ` · server clock vs this browser: ${browserSkew <= 0 ? "+" : ""}${num(-browserSkew)} ms`;
  const regCls =
    sf.registryState === "connected"
      ? "ok"
      : sf.registryState === "reports failing"
        ? "warn"
        : "bad";
  const registryTile = el("div", { cls: "tile" }, [
    el("div", { cls: "k", text: `Registry (${sf.registry})` }),
    el("div", { cls: "v" }, [chip(sf.registryState, regCls, "registry-state")]),
    el("div", { cls: "s", text: `timestamp reported ${ago(sf.lastReportAt, now)}` }),
  ]);
  const rb: Partial<typeof sf.rollbacks> = sf.rollbacks || {};
  const rollbacks = (rb.waited || 0) + (rb.backup || 0) + (rb.refused || 0);
  const tiles = el("div", { cls: "tiles" }, [
    registryTile,
    tile(
      "Sequence overflow waits",
      num(String(sf.overflowWaits)),
      `ids that waited for the next ms: more than ${num(String(2 ** layout.sequenceBits))} ids in one`,
      "overflow-waits",
    ),
    tile(
      "Clock rollbacks",
      num(String(rollbacks)),
      `waited ${rb.waited || 0} · backup id ${rb.backup || 0} · refused ${rb.refused || 0}`,
      "rollbacks",
    ),
    tile(
      "Worker id",
      String(sf.workerId),
      sf.activeWorkerId !== sf.workerId
        ? `issuing under backup ${sf.activeWorkerId}`
        : sf.backups.length
          ? `${sf.backups.length} backup(s)`
          : "no backups",
      "worker-id",
    ),
    leaseTile,
    tile(
      "Last timestamp",
      sf.lastTimestamp ? clock(sf.lastTimestamp) : "none",
      sf.lastTimestamp ? `${String(sf.lastTimestamp)} ms` : "no id issued yet",
      "last-timestamp",
    ),
    tile("Clock vs last id", offset, offsetNote, "clock-offset"),
  ]);
  const events = el("div", { cls: "events" }, [
    el("div", { text: "Recent lease events:" }),
    ...sf.events
      .slice()
      .reverse()
      .map((e) => el("div", { text: `${clock(e.at)}  ${e.type}: ${e.text}` })),
  ]);
  replace("snowflake-body", [tiles, events]);
}

function renderRedis(rs: RedisSequence): void {
  const sub = byId("redis-sub");
  if (!rs.enabled) {
    sub.textContent = "";
    disabled(
      "redis-body",
      "The redis sequence is not configured on this server (redisSequence.url).",
    );
    return;
  }
  if (!rs.running) {
    sub.textContent = "";
    disabled("redis-body", "Starting...");
    return;
  }
  sub.textContent = `namespace ${rs.namespace} · ${rs.redis.where} · layout ${rs.layout}`;
  const cls =
    rs.status === "ready"
      ? "ok"
      : rs.status === "fenced" || rs.status === "starting"
        ? "warn"
        : "bad";
  const statusTile = el("div", { cls: "tile" }, [
    el("div", { cls: "k", text: "Status" }),
    el("div", { cls: "v" }, [chip(rs.status, cls, "redis-status")]),
    el("div", {
      cls: "s",
      text: rs.redis.reachable
        ? "Redis reachable"
        : `Redis unreachable${rs.redis.lastError ? `: ${rs.redis.lastError}` : ""}`,
    }),
  ]);
  const tiles = el("div", { cls: "tiles" }, [
    statusTile,
    tile(
      "Ids issued",
      num(rs.stats.ids),
      `${num(rs.stats.roundTrips)} round trips · ${num(rs.stats.failures)} failures`,
    ),
    tile(
      "Redis clock offset",
      rs.redis.clockOffsetMs === undefined
        ? "n/a"
        : `${num(Math.round(rs.redis.clockOffsetMs))} ms`,
      "Redis TIME minus this clock",
    ),
    tile(
      "Fence",
      rs.fence?.active ? `until ${rs.fence.until}` : "none",
      "seconds refused after a Redis restart",
    ),
  ]);
  const slots =
    rs.slots.length === 0
      ? el("p", { cls: "empty", text: "No ranges cached." })
      : el("table", {}, [
          el("thead", {}, [headRow(["shard", "second", "remaining", "ranges", "batch"])]),
          el(
            "tbody",
            {},
            rs.slots.map((s) =>
              el("tr", {}, [
                el("td", { text: s.shard === undefined ? "all" : String(s.shard) }),
                el("td", { text: clock(s.second * 1000) }),
                el("td", { text: num(s.remaining) }),
                el("td", { text: String(s.ranges) }),
                el("td", { text: num(s.batchSize) }),
              ]),
            ),
          ),
        ]);
  replace("redis-body", [tiles, el("div", { cls: "events" }, [slots])]);
}

function render(data: MonitorState): void {
  const banner = byId("banner");
  banner.style.display = "none";
  byId("server-name").textContent =
    `${data.server.name} · v${data.server.version} · up ${duration(data.server.uptimeMs)}`;
  const st = byId("server-state");
  st.textContent = data.ready ? "ready" : data.server.state;
  st.className = `chip ${data.ready ? "ok" : data.server.state === "stopping" ? "bad" : "warn"}`;
  byId("updated").textContent = `updated ${clock(data.now)} UTC`;
  const cfg = data.server.config;
  byId("config").textContent = `config ${cfg.sources.join(" + ")} · #${cfg.fingerprint}`;
  renderActivity(data.activity, data);
  renderWorkers(data.workers);
  renderErrors(data.activity);
  renderCapacity(data.capacity);
  renderSegment(data.segment, data.now);
  renderSnowflake(data.snowflake, data.now);
  renderRedis(data.redisSequence);
  if (!data.segment.enabled || !data.segment.running) {
    replace("store-table", [
      el("p", {
        cls: "empty",
        text: data.segment.enabled ? "Starting..." : "Segment mode is disabled.",
      }),
    ]);
  }
}

function tick(): void {
  fetch("api/v1/monitor", { cache: "no-store" })
    .then((r) => {
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      return r.json() as Promise<MonitorState>;
    })
    .then((data) => {
      receivedAt = Date.now();
      render(data);
      if (
        data.segment.enabled &&
        data.segment.running &&
        Date.now() - lastStoreFetch >= STORE_REFRESH_MS
      ) {
        lastStoreFetch = Date.now();
        return fetch("api/v1/monitor/store", { cache: "no-store" })
          .then((r) => (r.ok ? (r.json() as Promise<{ rows: StoreRow[] }>) : null))
          .then((s) => {
            if (s) renderStore(s.rows);
          });
      }
    })
    .catch((e: Error) => {
      const banner = byId("banner");
      banner.textContent = `Server unreachable (${e.message}); retrying every second. The figures below are from the last answer.`;
      banner.style.display = "block";
      const st = byId("server-state");
      st.textContent = "unreachable";
      st.className = "chip bad";
    })
    .then(() => {
      setTimeout(tick, REFRESH_MS);
    });
}
tick();
