// The monitor page's script, inlined into the page by monitor-page.ts: polls /api/v1/monitor every
// second and the store's rows every five, and builds the DOM with textContent only (a tag name can
// never inject markup). Plain ES5 in a string, without template literals, so that it can live here.

/** The script's source. */
export const MONITOR_SCRIPT = `(function () {
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
  // The page's one time format: yyyy-MM-dd HH:mm:ss.SSS in UTC (the header says so).
  function clock(ms) {
    if (!ms) return "never";
    var iso = new Date(ms).toISOString();
    return iso.slice(0, 10) + " " + iso.slice(11, 23);
  }
  function rate(n) {
    if (n >= 100) return num(String(Math.round(n)));
    if (n >= 10) return n.toFixed(1);
    return n === 0 ? "0" : n.toFixed(2);
  }
  function span(seconds) {
    if (seconds === null || seconds === undefined) return "idle";
    var y = seconds / (365.25 * 86400);
    if (y >= 1) return (y >= 1000 ? num(String(Math.round(y))) : y.toFixed(1)) + " years";
    if (seconds >= 86400) return Math.floor(seconds / 86400) + " days";
    return duration(seconds * 1000);
  }
  var SVG = "http://www.w3.org/2000/svg";
  // A sparkline of one or more series (same scale), as an inline SVG.
  function spark(series, width, height, testid) {
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("width", String(width));
    svg.setAttribute("height", String(height));
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    if (testid) svg.setAttribute("data-testid", testid);
    var max = 1;
    series.forEach(function (s) { s.values.forEach(function (v) { if (v > max) max = v; }); });
    series.forEach(function (s) {
      var n = s.values.length, pts = [];
      for (var i = 0; i < n; i++) {
        var x = n === 1 ? 0 : (i * width) / (n - 1);
        var y = height - 1 - (s.values[i] / max) * (height - 2);
        pts.push(x.toFixed(1) + "," + y.toFixed(1));
      }
      var line = document.createElementNS(SVG, "polyline");
      line.setAttribute("class", s.cls);
      line.setAttribute("points", pts.join(" "));
      line.setAttribute("data-max", String(Math.max.apply(null, s.values.concat([0]))));
      svg.appendChild(line);
    });
    return svg;
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
    // Long values (times, big numbers) in a smaller font, so that a tile never wraps them.
    var v = el("div", { cls: value.length > 14 ? "v long" : "v", text: value });
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

  // Activity and capacity rows of the last answer, by tag, for the tag cards.
  var tagActivity = {}, tagCapacity = {};

  function modeName(mode) {
    return mode === "segment" ? "Segment" : mode === "snowflake" ? "Snowflake" : mode === "redisSequence" ? "Redis sequence" : mode;
  }

  function legend() {
    return el("div", { cls: "legend" }, [el("b", { style: "background: var(--bar)" }), el("span", { text: "ids/s" }),
      el("b", { style: "background: var(--amber)" }), el("span", { text: "requests/s" })]);
  }

  function renderActivity(act, data) {
    document.getElementById("activity-sub").textContent =
      "ids and requests per second, now (last " + act.rateSeconds + " s) and over the last " + (act.sparklineSeconds / 60) + " minutes";
    tagActivity = {};
    act.tags.forEach(function (t) { tagActivity[t.mode + "\\u0000" + t.tag] = t; });
    var enabled = [];
    if (data.segment.enabled) enabled.push("segment");
    if (data.snowflake.enabled) enabled.push("snowflake");
    if (data.redisSequence.enabled) enabled.push("redisSequence");
    var byMode = {};
    act.modes.forEach(function (m) { byMode[m.mode] = m; });
    if (enabled.length === 0) { replace("activity-modes", [el("p", { cls: "empty", text: "No mode is enabled." })]); return; }
    replace("activity-modes", enabled.map(function (mode) {
      var m = byMode[mode] || { idsPerSecond: 0, requestsPerSecond: 0, ids: [], requests: [] };
      var v = el("div", { cls: "v", "data-testid": "ids-rate", text: rate(m.idsPerSecond) + " ids/s" });
      return el("div", { cls: "tile", "data-testid": "mode-activity", "data-mode": mode }, [
        el("div", { cls: "k", text: modeName(mode) }), v,
        el("div", { cls: "s", "data-testid": "requests-rate", text: rate(m.requestsPerSecond) + " requests/s" }),
        spark([{ values: m.requests, cls: "req" }, { values: m.ids, cls: "ids" }], 180, 34, "mode-spark"),
        legend()]);
    }));
  }

  function renderErrors(act) {
    var minutes = act.errorWindowSeconds / 60;
    document.getElementById("errors-sub").textContent = "answers with an error code in the last " + minutes + " minutes";
    if (act.errors.length === 0) { replace("errors-table", [el("p", { cls: "empty", "data-testid": "no-errors", text: "No errors in the last " + minutes + " minutes." })]); return; }
    var head = el("tr", {}, ["code", "mode", "count", "last", "last " + (act.sparklineSeconds / 60) + " min"].map(function (h) { return el("th", { text: h }); }));
    var body = act.errors.map(function (e) {
      return el("tr", { "data-testid": "error-row", "data-code": e.code }, [
        el("td", {}, [chip(e.code, e.code.indexOf("HTTP 5") === 0 || /UNAVAILABLE|EXHAUSTED|CLOCK|LEASE|CORRUPT|INTERNAL/.test(e.code) ? "bad" : "warn")]),
        el("td", { text: e.mode ? modeName(e.mode) : "other endpoints" }),
        el("td", { "data-testid": "error-count", text: num(String(e.count)) }),
        el("td", { text: clock(e.lastAt) }),
        el("td", {}, [spark([{ values: e.history, cls: "err" }], 160, 22)])]);
    });
    replace("errors-table", [el("table", {}, [el("thead", {}, [head]), el("tbody", {}, body)])]);
  }

  function renderCapacity(cap, now) {
    document.getElementById("capacity-sub").textContent =
      "warned when fewer than " + cap.thresholds.years + " years are left, or fewer than " + Math.round(cap.thresholds.workerFraction * 100) + "% of the worker ids";
    replace("capacity-warnings", cap.warnings.map(function (w) {
      return el("li", { "data-testid": "capacity-warning", "data-subject": w.subject, text: w.message.replace(/^\\[leaf\\] \\[server\\] capacity: /, "") });
    }));
    var tiles = [];
    if (cap.layout) {
      tiles.push(tile("Snowflake layout runs out", clock(cap.layout.lastInstantMs).slice(0, 10),
        clock(cap.layout.lastInstantMs) + " · in " + span(cap.layout.secondsLeft) + " · layout " + cap.layout.name, "layout-end"));
    }
    if (cap.workerIds) {
      var w = cap.workerIds;
      tiles.push(tile("Worker ids left", w.left === null ? (w.reused ? "recycled" : "set by hand") : num(String(w.left)) + " of " + num(String(w.space)),
        w.left === null ? (w.reused ? w.registry + " " + w.mode + " mode: ids come back when nodes stop; " + num(String(w.space)) + " in the space"
          : "local registry: ids are configured per node; " + num(String(w.space)) + " in the space")
          : w.registry + " " + w.mode + " mode never gives an id back; this node holds " + w.highestHeld, "worker-ids-left"));
    }
    replace("capacity-tiles", tiles);
    tagCapacity = {};
    cap.tags.forEach(function (t) { tagCapacity[t.tag] = t; });
    if (cap.tags.length === 0) { replace("capacity-tags", []); return; }
    var head = el("tr", {}, ["tag", "max_id", "headroom below 2^63 - 1", "at the current rate it lasts", "days"].map(function (h) { return el("th", { text: h }); }));
    var rows = cap.tags.map(function (t) {
      return el("tr", { "data-testid": "headroom-row", "data-tag": t.tag }, [el("td", { text: t.tag }), el("td", { text: num(t.maxId) }),
        el("td", { text: num(t.headroom) }),
        el("td", { "data-testid": "headroom-time", text: t.usedUp ? "used up" : t.headroomYears === null ? "idle" : span(t.headroomYears * 365.25 * 86400) }),
        el("td", { "data-testid": "headroom-days", text: t.headroomDays === null ? "" : num(String(Math.floor(t.headroomDays))) })]);
    });
    replace("capacity-tags", [el("table", {}, [el("thead", {}, [head]), el("tbody", {}, rows)])]);
  }

  function renderSegment(seg, now) {
    if (!seg.enabled) { document.getElementById("segment-sub").textContent = ""; disabled("segment-tags", "Segment mode is disabled on this server."); return; }
    if (!seg.running) { document.getElementById("segment-sub").textContent = seg.store + " store"; disabled("segment-tags", "Starting..."); return; }
    var health = seg.storeHealth;
    var sub = document.getElementById("segment-sub");
    sub.textContent = "";
    if (health) {
      sub.appendChild(chip(health.state === "down" ? "database down" : health.state === "up" ? "database up" : "database not used yet",
        health.state === "down" ? "bad" : health.state === "up" ? "ok" : "off", "store-health"));
      sub.appendChild(document.createTextNode(" "));
    }
    sub.appendChild(document.createTextNode(
      seg.store + " store · " + seg.tags.length + " tag" + (seg.tags.length === 1 ? "" : "s") +
      " · tag list read " + ago(seg.status.lastRefreshAt, now) +
      (seg.status.lastRefreshError ? " · last refresh failed: " + seg.status.lastRefreshError : "") +
      (health && health.state === "down" ? " · last failure " + clock(health.lastFailureAt) + ": " + health.lastFailure : "")));
    if (seg.tags.length === 0) { disabled("segment-tags", "No tags in the store."); return; }
    var cards = seg.tags.map(function (t) {
      var state = t.state === "exhausted" ? chip("used up", "bad", "tag-state")
        : t.state === "refused" ? chip("refused", "bad", "tag-state")
        : t.state === "load-failing" ? chip("load failing", "bad", "tag-state")
        : t.state === "lazy" ? chip("loads on first request", "off", "tag-state")
        : t.state === "loading" ? chip("loading", "warn", "tag-state")
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
      var a = tagActivity["segment\\u0000" + t.tag];
      var c = tagCapacity[t.tag];
      var motion = el("div", { cls: "rate", "data-testid": "tag-rate",
        text: (a ? rate(a.idsPerSecond) : "0") + " ids/s · " + (a ? rate(a.requestsPerSecond) : "0") + " requests/s · both ranges last " +
          (c && c.bufferSecondsLeft !== null ? span(c.bufferSecondsLeft) : "(idle)") + " at the last minute's rate" }, [
      ]);
      if (a) motion.appendChild(spark([{ values: a.requests, cls: "req" }, { values: a.ids, cls: "ids" }], 380, 30, "tag-spark"));
      var children = [title, motion].concat(ranges).concat([foot]);
      if (t.refused) children.push(el("div", { cls: "error", "data-testid": "tag-refused", text: t.refused.message }));
      else if (t.lastError && t.consecutiveFailures > 0) children.push(el("div", { cls: "error", text: t.lastError }));
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
        el("td", { text: r.description || "" }), el("td", { text: r.updatedAt ? clock(r.updatedAt) : "" })]);
    });
    replace("store-table", [el("table", {}, [el("thead", {}, [head]), el("tbody", {}, body)])]);
  }

  function renderSnowflake(sf, now) {
    var serverNow = now;
    var sub = document.getElementById("snowflake-sub");
    if (!sf.enabled) { sub.textContent = ""; disabled("snowflake-body", "Snowflake mode is disabled on this server."); return; }
    if (!sf.running) { sub.textContent = sf.registry + " registry"; disabled("snowflake-body", "Starting..."); return; }
    sub.textContent = sf.registry + " registry · node " + sf.node.ip + ":" + sf.node.port + " · layout " + sf.layout.name +
      " (" + sf.layout.timestampBits + "/" + sf.layout.workerBits + "/" + sf.layout.sequenceBits + ", epoch " + clock(sf.layout.epoch) + ")";
    var leaseCls = sf.state === "held" ? "ok" : sf.state === "fenced" ? "bad" : "off";
    var leaseTile = el("div", { cls: "tile" }, [el("div", { cls: "k", text: "Lease" }),
      el("div", { cls: "v" }, [chip(sf.state, leaseCls, "lease-state")]),
      el("div", { cls: "s", text: "last report " + ago(sf.lastReportAt, now) })]);
    var offset = sf.clockOffsetMs === null ? "no id yet" : (sf.clockOffsetMs >= 0 ? "+" : "") + num(sf.clockOffsetMs) + " ms";
    var offsetNote = sf.clockOffsetMs === null ? "" : sf.clockOffsetMs >= 0 ? "clock ahead of the last id: safe" : "clock BEHIND the last id: ids wait or are refused";
    var browserSkew = Math.round(receivedAt - serverNow);
    offsetNote += " · server clock vs this browser: " + (browserSkew <= 0 ? "+" : "") + num(-browserSkew) + " ms";
    var regCls = sf.registryState === "connected" ? "ok" : sf.registryState === "reports failing" ? "warn" : "bad";
    var registryTile = el("div", { cls: "tile" }, [el("div", { cls: "k", text: "Registry (" + sf.registry + ")" }),
      el("div", { cls: "v" }, [chip(sf.registryState, regCls, "registry-state")]),
      el("div", { cls: "s", text: "timestamp reported " + ago(sf.lastReportAt, now) })]);
    var rb = sf.rollbacks || {};
    var rollbacks = (rb.waited || 0) + (rb.backup || 0) + (rb.refused || 0);
    var tiles = el("div", { cls: "tiles" }, [
      registryTile,
      tile("Sequence overflow waits", num(String(sf.overflowWaits)), "ids that waited for the next ms: more than " + num(String(Math.pow(2, sf.layout.sequenceBits))) + " ids in one", "overflow-waits"),
      tile("Clock rollbacks", num(String(rollbacks)), "waited " + (rb.waited || 0) + " · backup id " + (rb.backup || 0) + " · refused " + (rb.refused || 0), "rollbacks"),
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
          return el("tr", {}, [el("td", { text: s.shard === undefined ? "all" : String(s.shard) }), el("td", { text: clock(s.second * 1000) }),
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
    document.getElementById("updated").textContent = "updated " + clock(data.now) + " UTC";
    var cfg = data.server.config;
    document.getElementById("config").textContent = "config " + cfg.sources.join(" + ") + " · #" + cfg.fingerprint;
    renderActivity(data.activity, data);
    renderErrors(data.activity);
    renderCapacity(data.capacity, data.now);
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
`;
