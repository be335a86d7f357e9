// The monitor page: Java Leaf's /cache and /db pages remade as one live page, with motion (rates
// and sparklines, recent errors) and capacity. Self-contained (no external files), it polls
// /api/v1/monitor every second and the store's rows every five, and builds the DOM with textContent
// only, so a tag name can never inject markup. Every time is shown in one format, in UTC.

import { MONITOR_SCRIPT } from "./monitor-script";

/** The page's HTML, with its script (browser/monitor.ts, bundled at build) inline. */
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
  .tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(200px, 1fr)); gap: 12px; }
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
  .spark { display: block; margin-top: 6px; }
  .spark polyline { fill: none; stroke-width: 1.5; }
  .spark .ids { stroke: var(--bar); stroke-width: 2; }
  .spark .req { stroke: var(--amber); }
  .spark .err { stroke: var(--red); }
  .legend { font-size: 11px; color: var(--muted); }
  .legend b { display: inline-block; width: 10px; height: 3px; vertical-align: middle; margin: 0 4px 0 8px; }
  .rate { font-size: 12px; color: var(--ink); margin: 6px 0 0; font-variant-numeric: tabular-nums; }
  .rate .spark { margin-top: 4px; }
  .warnings { margin: 0 0 12px; padding: 0; list-style: none; }
  .warnings li { background: var(--amber-bg); color: #744210; border: 1px solid #f6e05e; border-radius: 8px; padding: 8px 12px; margin-bottom: 6px; font-size: 13px; }
  .tile .v .chip { font-size: 13px; }
  .tile .v.long { font-size: 12px; padding-top: 6px; word-break: normal; white-space: nowrap; }
  td .spark { margin: 0; }
  #banner { display: none; background: var(--red-bg); color: var(--red); padding: 8px 24px; font-weight: 600; }
</style>
</head>
<body>
<header>
  <h1>Leaf monitor</h1>
  <span class="meta" id="server-name"></span>
  <span id="server-state" class="chip off">connecting</span>
  <span class="spacer"></span>
  <span class="meta" id="config" data-testid="config"></span>
  <span class="meta" id="updated"></span>
</header>
<div id="banner" role="alert"></div>
<main>
  <section id="activity" data-testid="activity">
    <h2>Activity <span class="sub" id="activity-sub"></span></h2>
    <div class="tiles" id="activity-modes"></div>
  </section>
  <section id="workers" data-testid="workers" hidden>
    <h2>Worker processes <span class="sub" id="workers-sub"></span></h2>
    <div id="workers-table"></div>
  </section>
  <section id="errors" data-testid="errors">
    <h2>Errors <span class="sub" id="errors-sub"></span></h2>
    <div id="errors-table"></div>
  </section>
  <section id="capacity" data-testid="capacity">
    <h2>Capacity <span class="sub" id="capacity-sub"></span></h2>
    <ul class="warnings" id="capacity-warnings"></ul>
    <div class="tiles" id="capacity-tiles"></div>
    <div id="capacity-tags" class="events"></div>
  </section>
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
${MONITOR_SCRIPT}</script>
</body>
</html>
`;
