// The monitor page: Java Leaf's /cache and /db pages remade as one live page. Self-contained (no
// external files), it polls /api/v1/monitor every second and the store's rows every five, and
// builds the DOM with textContent only, so a tag name can never inject markup.

/** The page's HTML. The script avoids template literals so that it can live in this string. */
export const MONITOR_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Leaf monitor</title>
<style>
  :root {
    --bg: #f5f6f8; --card: #fff; --ink: #1d2330; --muted: #6b7385; --line: #e3e6ec;
    --green: #1f9d55; --green-bg: #e3f6ea; --amber: #b7791f; --amber-bg: #fdf3dc;
    --red: #c53030; --red-bg: #fde8e8; --blue: #2b6cb0; --blue-bg: #e6f0fa; --bar: #3b82f6; --bar-next: #94b8f0;
  }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg); color: var(--ink); }
  header { display: flex; align-items: center; gap: 14px; padding: 12px 24px; background: #1d2330; color: #fff; position: sticky; top: 0; z-index: 1; }
  header h1 { font-size: 17px; margin: 0; font-weight: 600; }
  header .meta { color: #b7bfcf; font-size: 13px; }
  header .spacer { flex: 1; }
  main { padding: 20px 24px 40px; max-width: 1280px; margin: 0 auto; }
  section { margin-bottom: 28px; }
  h2 { font-size: 15px; margin: 0 0 10px; display: flex; align-items: baseline; gap: 10px; }
  h2 .sub { font-weight: 400; color: var(--muted); font-size: 13px; }
  .chip { display: inline-block; padding: 1px 9px; border-radius: 999px; font-size: 12px; font-weight: 600; white-space: nowrap; }
  .ok { background: var(--green-bg); color: var(--green); }
  .warn { background: var(--amber-bg); color: var(--amber); }
  .bad { background: var(--red-bg); color: var(--red); }
  .info { background: var(--blue-bg); color: var(--blue); }
  .off { background: #eceef2; color: var(--muted); }
  .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(420px, 1fr)); gap: 14px; }
  .card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; }
  .card h3 { margin: 0 0 10px; font-size: 15px; display: flex; justify-content: space-between; gap: 10px; word-break: break-all; }
  .range { display: grid; grid-template-columns: 92px 1fr; gap: 4px 10px; align-items: center; margin: 8px 0; }
  .range .name { font-size: 12px; color: var(--muted); }
  .range .name .chip { margin-top: 3px; }
  .bar { position: relative; height: 18px; background: #edf0f5; border-radius: 5px; overflow: hidden; }
  .bar .fill { position: absolute; inset: 0 auto 0 0; background: var(--bar); transition: width .4s ease; }
  .bar.next .fill { background: var(--bar-next); }
  .bar .label { position: absolute; inset: 0; display: flex; align-items: center; padding: 0 8px; font-size: 11px; font-weight: 600; color: #0f1a2e; }
  .numbers { grid-column: 2; font-size: 12px; color: var(--muted); font-variant-numeric: tabular-nums; }
  .foot { margin-top: 8px; font-size: 12px; color: var(--muted); border-top: 1px solid var(--line); padding-top: 8px; }
  .error { color: var(--red); font-size: 12px; margin-top: 6px; word-break: break-word; }
  .tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(190px, 1fr)); gap: 12px; }
  .tile { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
  .tile .k { font-size: 12px; color: var(--muted); }
  .tile .v { font-size: 20px; font-weight: 600; margin-top: 2px; font-variant-numeric: tabular-nums; word-break: break-all; }
  .tile .s { font-size: 12px; color: var(--muted); }
  table { width: 100%; border-collapse: collapse; background: var(--card); border: 1px solid var(--line); border-radius: 10px; overflow: hidden; }
  th, td { text-align: left; padding: 7px 12px; border-bottom: 1px solid var(--line); font-size: 13px; font-variant-numeric: tabular-nums; }
  th { background: #fafbfc; color: var(--muted); font-weight: 600; font-size: 12px; }
  tr:last-child td { border-bottom: 0; }
  .events { margin-top: 12px; font-size: 12px; color: var(--muted); }
  .events div { padding: 2px 0; }
  .empty { color: var(--muted); font-style: italic; }
  #banner { display: none; background: var(--red-bg); color: var(--red); padding: 8px 24px; font-weight: 600; }
</style>
</head>
<body>
<header>
  <h1>Leaf monitor</h1>
  <span class="meta" id="server-name"></span>
  <span id="server-state" class="chip off">connecting</span>
  <span class="spacer"></span>
  <span class="meta" id="updated"></span>
</header>
<div id="banner" role="alert"></div>
<main>
  <section id="segment" data-testid="segment">
    <h2>Segment mode <span class="sub" id="segment-sub"></span></h2>
    <div class="grid" id="segment-tags"></div>
  </section>
  <section id="store" data-testid="store">
    <h2>Store <span class="sub" id="store-sub">leaf_alloc rows (Java Leaf's /db page)</span></h2>
    <div id="store-table"></div>
  </section>
  <section id="snowflake" data-testid="snowflake">
    <h2>Snowflake mode <span class="sub" id="snowflake-sub"></span></h2>
    <div id="snowflake-body"></div>
  </section>
  <section id="redis" data-testid="redis">
    <h2>Redis sequence <span class="sub" id="redis-sub"></span></h2>
    <div id="redis-body"></div>
  </section>
</main>
<script>
(function () {
  "use strict";
  var REFRESH_MS = 1000, STORE_REFRESH_MS = 5000;
  var lastStoreFetch = 0;
  var receivedAt = Date.now();

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "cls") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }
  function replace(id, nodes) {
    var host = document.getElementById(id);
    host.textContent = "";
    nodes.forEach(function (n) { host.appendChild(n); });
  }
  function num(s) {
    if (s === null || s === undefined) return "";
    var str = String(s), neg = str.charAt(0) === "-";
    if (neg) str = str.slice(1);
    var out = "";
    while (str.length > 3) { out = "," + str.slice(-3) + out; str = str.slice(0, -3); }
    return (neg ? "-" : "") + str + out;
  }
  function big(s) { try { return BigInt(s); } catch (e) { return 0n; } }
  function clock(ms) {
    if (!ms) return "never";
    var d = new Date(ms);
    function p(n, w) { n = String(n); while (n.length < (w || 2)) n = "0" + n; return n; }
    return p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds()) + "." + p(d.getMilliseconds(), 3);
  }
  function ago(ms, now) {
    if (!ms) return "never";
    var s = Math.max(0, Math.round((now - ms) / 1000));
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    return Math.floor(s / 3600) + " h ago";
  }
  function duration(ms) {
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }
  function chip(text, cls, testid) {
    var attrs = { cls: "chip " + cls, text: text };
    if (testid) attrs["data-testid"] = testid;
    return el("span", attrs);
  }
  function tile(key, value, sub, testid) {
    var v = el("div", { cls: "v", text: value });
    if (testid) v.setAttribute("data-testid", testid);
    return el("div", { cls: "tile" }, [el("div", { cls: "k", text: key }), v, sub ? el("div", { cls: "s", text: sub }) : null]);
  }
  function disabled(id, text) {
    replace(id, [el("p", { cls: "empty", text: text })]);
  }

  function rangeRow(tag, index, range, isCurrent, snap) {
    var label, cls;
    if (isCurrent) { label = "current"; cls = "ok"; }
    else if (range) { label = "next ready"; cls = "info"; }
    else if (snap.loading) { label = "loading"; cls = "warn"; }
    else { label = "not loaded"; cls = "off"; }
    var name = el("div", { cls: "name" }, [el("div", { text: "Segment " + index }), chip(label, cls, "range-state")]);
    var bar = el("div", { cls: "bar" + (isCurrent ? "" : " next"), "data-testid": "bar" });
    var numbers;
    if (range) {
      var left = big(range.max) - big(range.value);
      var step = range.step > 0 ? range.step : 1;
      var pct = Number(left * 10000n / BigInt(step)) / 100;
      if (pct < 0) pct = 0;
      if (pct > 100) pct = 100;
      bar.setAttribute("data-fill", pct.toFixed(2));
      var fill = el("div", { cls: "fill" });
      fill.style.width = pct.toFixed(2) + "%";
      bar.appendChild(fill);
      bar.appendChild(el("div", { cls: "label", text: num(left.toString()) + " left (" + pct.toFixed(1) + "%)" }));
      numbers = el("div", { cls: "numbers", "data-testid": "range-numbers",
        text: "value " + num(range.value) + " · max " + num(range.max) + " · step " + num(range.step) });
    } else {
      bar.setAttribute("data-fill", "0");
      bar.appendChild(el("div", { cls: "label", text: "empty" }));
      numbers = el("div", { cls: "numbers", text: "no range" });
    }
    return el("div", { cls: "range", "data-testid": "range-" + index }, [name, bar, numbers]);
  }

  function renderSegment(seg, now) {
    if (!seg.enabled) { document.getElementById("segment-sub").textContent = ""; disabled("segment-tags", "Segment mode is disabled on this server."); return; }
    if (!seg.running) { document.getElementById("segment-sub").textContent = seg.store + " store"; disabled("segment-tags", "Starting..."); return; }
    document.getElementById("segment-sub").textContent =
      seg.store + " store · " + seg.tags.length + " tag" + (seg.tags.length === 1 ? "" : "s") +
      " · tag list read " + ago(seg.status.lastRefreshAt, now) +
      (seg.status.lastRefreshError ? " · last refresh failed: " + seg.status.lastRefreshError : "");
    if (seg.tags.length === 0) { disabled("segment-tags", "No tags in the store."); return; }
    var cards = seg.tags.map(function (t) {
      var state = t.consecutiveFailures > 0 ? chip("load failing", "bad", "tag-state")
        : !t.initialized ? chip("loading", "warn", "tag-state")
        : t.nextReady ? chip("next ready", "ok", "tag-state")
        : t.loading ? chip("loading next", "info", "tag-state") : chip("ready", "ok", "tag-state");
      var title = el("h3", {}, [el("span", { text: t.tag, "data-testid": "tag-name" }), state]);
      var ranges = [0, 1].map(function (i) {
        return rangeRow(t.tag, i, t.segments[i], t.initialized && t.currentPos === i, t);
      });
      var foot = el("div", { cls: "foot", "data-testid": "tag-foot",
        text: "last load " + clock(t.lastLoadAt) +
          (t.lastLoadDurationMs !== null ? " (" + t.lastLoadDurationMs.toFixed(1) + " ms)" : "") +
          " · " + num(t.loads) + " loads · " + num(t.loadFailures) + " failures · step " + num(t.step) +
          " (table " + num(t.tableStep) + ") · " + num(t.idsLeft) + " ids left" });
      var children = [title].concat(ranges).concat([foot]);
      if (t.lastError && t.consecutiveFailures > 0) children.push(el("div", { cls: "error", text: t.lastError }));
      return el("div", { cls: "card", "data-testid": "tag", "data-tag": t.tag }, children);
    });
    replace("segment-tags", cards);
  }

  function renderStore(rows) {
    if (!rows) return;
    if (rows.length === 0) { replace("store-table", [el("p", { cls: "empty", text: "The store holds no tags." })]); return; }
    var head = el("tr", {}, ["tag", "max_id", "step", "description", "updated"].map(function (h) { return el("th", { text: h }); }));
    var body = rows.map(function (r) {
      return el("tr", { "data-testid": "store-row" }, [
        el("td", { text: r.tag }), el("td", { text: num(r.maxId) }), el("td", { text: num(r.step) }),
        el("td", { text: r.description || "" }), el("td", { text: r.updatedAt ? new Date(r.updatedAt).toLocaleString() : "" })]);
    });
    replace("store-table", [el("table", {}, [el("thead", {}, [head]), el("tbody", {}, body)])]);
  }

  function renderSnowflake(sf, now) {
    var serverNow = now;
    var sub = document.getElementById("snowflake-sub");
    if (!sf.enabled) { sub.textContent = ""; disabled("snowflake-body", "Snowflake mode is disabled on this server."); return; }
    if (!sf.running) { sub.textContent = sf.registry + " registry"; disabled("snowflake-body", "Starting..."); return; }
    sub.textContent = sf.registry + " registry · node " + sf.node.ip + ":" + sf.node.port + " · layout " + sf.layout.name +
      " (" + sf.layout.timestampBits + "/" + sf.layout.workerBits + "/" + sf.layout.sequenceBits + ", epoch " + new Date(sf.layout.epoch).toISOString() + ")";
    var leaseCls = sf.state === "held" ? "ok" : sf.state === "fenced" ? "bad" : "off";
    var leaseTile = el("div", { cls: "tile" }, [el("div", { cls: "k", text: "Lease" }),
      el("div", { cls: "v" }, [chip(sf.state, leaseCls, "lease-state")]),
      el("div", { cls: "s", text: "last report " + ago(sf.lastReportAt, now) })]);
    var offset = sf.clockOffsetMs === null ? "no id yet" : (sf.clockOffsetMs >= 0 ? "+" : "") + num(sf.clockOffsetMs) + " ms";
    var offsetNote = sf.clockOffsetMs === null ? "" : sf.clockOffsetMs >= 0 ? "clock ahead of the last id: safe" : "clock BEHIND the last id: ids wait or are refused";
    var browserSkew = Math.round(receivedAt - serverNow);
    offsetNote += " · server clock vs this browser: " + (browserSkew <= 0 ? "+" : "") + num(-browserSkew) + " ms";
    var tiles = el("div", { cls: "tiles" }, [
      tile("Worker id", String(sf.workerId), sf.activeWorkerId !== sf.workerId ? "issuing under backup " + sf.activeWorkerId : (sf.backups.length ? sf.backups.length + " backup(s)" : "no backups"), "worker-id"),
      leaseTile,
      tile("Last timestamp", sf.lastTimestamp ? clock(sf.lastTimestamp) : "none", sf.lastTimestamp ? String(sf.lastTimestamp) + " ms" : "no id issued yet", "last-timestamp"),
      tile("Clock vs last id", offset, offsetNote, "clock-offset"),
    ]);
    var events = el("div", { cls: "events" }, [el("div", { text: "Recent lease events:" })].concat(
      sf.events.slice().reverse().map(function (e) { return el("div", { text: clock(e.at) + "  " + e.type + ": " + e.text }); })));
    replace("snowflake-body", [tiles, events]);
  }

  function renderRedis(rs, now) {
    var sub = document.getElementById("redis-sub");
    if (!rs.enabled) { sub.textContent = ""; disabled("redis-body", "The redis sequence is not configured on this server (redisSequence.url)."); return; }
    if (!rs.running) { sub.textContent = ""; disabled("redis-body", "Starting..."); return; }
    sub.textContent = "namespace " + rs.namespace + " · " + rs.redis.where + " · layout " + rs.layout;
    var cls = rs.status === "ready" ? "ok" : rs.status === "fenced" || rs.status === "starting" ? "warn" : "bad";
    var statusTile = el("div", { cls: "tile" }, [el("div", { cls: "k", text: "Status" }),
      el("div", { cls: "v" }, [chip(rs.status, cls, "redis-status")]),
      el("div", { cls: "s", text: rs.redis.reachable ? "Redis reachable" : "Redis unreachable" + (rs.redis.lastError ? ": " + rs.redis.lastError : "") })]);
    var tiles = el("div", { cls: "tiles" }, [
      statusTile,
      tile("Ids issued", num(rs.stats.ids), num(rs.stats.roundTrips) + " round trips · " + num(rs.stats.failures) + " failures"),
      tile("Redis clock offset", rs.redis.clockOffsetMs === undefined ? "n/a" : num(Math.round(rs.redis.clockOffsetMs)) + " ms", "Redis TIME minus this clock"),
      tile("Fence", rs.fence && rs.fence.active ? "until " + rs.fence.until : "none", "seconds refused after a Redis restart"),
    ]);
    var slots = rs.slots.length === 0 ? el("p", { cls: "empty", text: "No ranges cached." }) :
      el("table", {}, [el("thead", {}, [el("tr", {}, ["shard", "second", "remaining", "ranges", "batch"].map(function (h) { return el("th", { text: h }); }))]),
        el("tbody", {}, rs.slots.map(function (s) {
          return el("tr", {}, [el("td", { text: s.shard === undefined ? "all" : String(s.shard) }), el("td", { text: new Date(s.second * 1000).toISOString() }),
            el("td", { text: num(s.remaining) }), el("td", { text: String(s.ranges) }), el("td", { text: num(s.batchSize) })]);
        }))]);
    replace("redis-body", [tiles, el("div", { cls: "events" }, [slots])]);
  }

  function render(data) {
    var banner = document.getElementById("banner");
    banner.style.display = "none";
    document.getElementById("server-name").textContent = data.server.name + " · v" + data.server.version + " · up " + duration(data.server.uptimeMs);
    var st = document.getElementById("server-state");
    st.textContent = data.ready ? "ready" : data.server.state;
    st.className = "chip " + (data.ready ? "ok" : data.server.state === "stopping" ? "bad" : "warn");
    document.getElementById("updated").textContent = "updated " + clock(data.now);
    renderSegment(data.segment, data.now);
    renderSnowflake(data.snowflake, data.now);
    renderRedis(data.redisSequence, data.now);
    if (!data.segment.enabled || !data.segment.running) {
      replace("store-table", [el("p", { cls: "empty", text: data.segment.enabled ? "Starting..." : "Segment mode is disabled." })]);
    }
  }

  function tick() {
    fetch("api/v1/monitor", { cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (data) {
        receivedAt = Date.now();
        render(data);
        if (data.segment.enabled && data.segment.running && Date.now() - lastStoreFetch >= STORE_REFRESH_MS) {
          lastStoreFetch = Date.now();
          return fetch("api/v1/monitor/store", { cache: "no-store" })
            .then(function (r) { return r.ok ? r.json() : null; })
            .then(function (s) { if (s) renderStore(s.rows); });
        }
      })
      .catch(function (e) {
        var banner = document.getElementById("banner");
        banner.textContent = "Server unreachable (" + e.message + "); retrying every second. The figures below are from the last answer.";
        banner.style.display = "block";
        var st = document.getElementById("server-state");
        st.textContent = "unreachable"; st.className = "chip bad";
      })
      .then(function () { setTimeout(tick, REFRESH_MS); });
  }
  tick();
})();
</script>
</body>
</html>
`;
