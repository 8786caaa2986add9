/**
 * The dashboard's one page: HTML, style and script, served as they are (no build step, nothing
 * fetched from anywhere but the dashboard itself; the charts are SVG the script draws).
 *
 * The script writes everything the journal holds with `textContent` and SVG attributes, never as
 * markup (tool names, paths, recorded code and output are the sandbox's), and the page's
 * Content-Security-Policy runs no script but this one. The token comes from the URL's fragment
 * (`#token=…`, never sent to a server), is kept in the tab's sessionStorage and removed from the
 * address bar, and travels as an Authorization header. Outcomes and phases are told by text and
 * by pattern, not by colour alone; the rows are focusable and open with Enter.
 */

export const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>hermes-sandbox dashboard</title>
<link rel="stylesheet" href="dashboard.css">
<script src="dashboard.js" defer></script>
</head>
<body>
<a class="skip" href="#recent">Skip to recent executions</a>
<header>
  <h1>hermes-sandbox dashboard</h1>
  <p id="status" role="status" aria-live="polite">Loading&hellip;</p>
</header>
<main>
  <section id="token-form" hidden aria-labelledby="token-h">
    <h2 id="token-h">Token</h2>
    <p>Open this page with <code>#token=&hellip;</code> after its address, or paste the dashboard's bearer token.</p>
    <form id="token-entry"><label for="token-input">Bearer token</label>
      <input id="token-input" type="password" autocomplete="off" required>
      <button type="submit">Use this token</button></form>
  </section>
  <section aria-labelledby="summary-h">
    <h2 id="summary-h">Summary</h2>
    <dl id="summary" class="summary"></dl>
  </section>
  <section aria-labelledby="running-h">
    <h2 id="running-h">Running now</h2>
    <p id="running-counts"></p>
    <table id="running">
      <thead><tr><th scope="col">Kind</th><th scope="col">Id</th><th scope="col">Language</th><th scope="col">Phase</th><th scope="col">Age</th><th scope="col">Deadline</th><th scope="col">Details</th></tr></thead>
      <tbody></tbody>
    </table>
  </section>
  <section aria-labelledby="charts-h">
    <h2 id="charts-h">Charts</h2>
    <p id="charts-range" class="note"></p>
    <div class="charts">
      <figure id="chart-outcomes"><figcaption>Executions per minute, by outcome</figcaption><div class="chart"></div><ul class="legend"></ul></figure>
      <figure id="chart-pool"><figcaption>Warm-pool hit rate per minute (claims of all creates and claims)</figcaption><div class="chart"></div><p class="legend-text"></p></figure>
    </div>
    <figure id="chart-latency"><figcaption>Latency per phase, p50 (solid line) and p95 (dashed line), per minute</figcaption><div class="small-multiples"></div></figure>
  </section>
  <section id="recent" aria-labelledby="recent-h">
    <h2 id="recent-h">Recent executions</h2>
    <p class="note">Select a row (click, or focus it and press Enter) for its whole history. Phases: <span id="phase-legend"></span></p>
    <table id="executions">
      <thead><tr><th scope="col">Id</th><th scope="col">Language</th><th scope="col">Outcome</th><th scope="col">Duration</th><th scope="col">Phases</th><th scope="col">Tools</th><th scope="col">Files</th><th scope="col">Ended</th></tr></thead>
      <tbody></tbody>
    </table>
    <nav class="pager" aria-label="Recent executions pages">
      <button id="newest" type="button">Newest</button>
      <button id="older" type="button">Older</button>
      <span id="page-info"></span>
    </nav>
  </section>
  <section id="detail" aria-labelledby="detail-h" hidden tabindex="-1">
    <h2 id="detail-h">Execution</h2>
    <button id="detail-close" type="button">Close (Escape)</button>
    <div id="detail-body"></div>
    <h3>History</h3>
    <ol id="history"></ol>
    <button id="history-more" type="button" hidden>More events</button>
  </section>
</main>
</body>
</html>
`

export const PAGE_CSS = `
:root { color-scheme: light; font-family: system-ui, sans-serif; line-height: 1.4; }
body { margin: 0 auto; max-width: 1200px; padding: 0 1rem 3rem; color: #111; background: #fff; }
.skip { position: absolute; left: -999px; } .skip:focus { left: 1rem; top: 1rem; background: #ff0; padding: .5rem; }
header { display: flex; align-items: baseline; gap: 1rem; flex-wrap: wrap; border-bottom: 2px solid #111; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.15rem; margin-top: 1.6rem; }
.summary { display: grid; grid-template-columns: repeat(auto-fill, minmax(11rem, 1fr)); gap: .5rem; }
.summary div { border: 1px solid #555; padding: .4rem .6rem; } .summary dt { font-size: .85rem; } .summary dd { margin: 0; font-size: 1.3rem; font-weight: 600; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { text-align: left; padding: .25rem .5rem; border-bottom: 1px solid #bbb; vertical-align: top; }
tbody tr.row { cursor: pointer; } tbody tr.row:hover { background: #eef; }
tr:focus, button:focus, input:focus, section:focus { outline: 3px solid #000; outline-offset: 2px; }
tr[aria-selected="true"] { background: #dde; font-weight: 600; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 1rem; }
figure { margin: 0; } figcaption { font-weight: 600; margin-bottom: .3rem; }
.small-multiples { display: grid; grid-template-columns: repeat(auto-fill, minmax(360px, 1fr)); gap: .5rem; }
.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .8rem; font-size: .85rem; }
.legend svg, .swatch { vertical-align: middle; margin-right: .25rem; }
.note { font-size: .85rem; color: #333; }
pre { background: #f4f4f4; border: 1px solid #999; padding: .5rem; overflow: auto; max-height: 24rem; white-space: pre-wrap; word-break: break-all; }
#history li { margin: .3rem 0; } #history .type { font-weight: 600; } #history dl { margin: .2rem 0 .2rem 1rem; display: grid; grid-template-columns: max-content 1fr; gap: 0 .6rem; font-size: .85rem; }
#history dt { font-style: italic; } #history dd { margin: 0; word-break: break-all; }
img.collected { max-width: 320px; max-height: 240px; border: 1px solid #555; background: #fff; }
.pager { margin-top: .5rem; display: flex; gap: .5rem; align-items: center; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
`

/** The page's script: plain ES2020, no dependency. */
export const PAGE_SCRIPT = String.raw`"use strict";
(function () {
  var SVG = "http://www.w3.org/2000/svg";
  var OUTCOMES = ["ok", "error", "oom", "timeout", "interrupted", "failed"];
  var MARKS = { ok: "\u2713", error: "\u2717", oom: "\u25B2", timeout: "\u25D4", interrupted: "\u25A0", failed: "!" };
  var PHASES = ["create", "claim", "start", "run", "removal"];
  // Patterns, not colours alone: every outcome and phase has its own fill (and its name as text).
  var FILLS = {
    ok: ["solid", "#222"], error: ["diagonal", "#222"], oom: ["cross", "#222"], timeout: ["dots", "#222"],
    interrupted: ["horizontal", "#555"], failed: ["vertical", "#555"],
    create: ["diagonal", "#333"], claim: ["dots", "#333"], start: ["cross", "#333"], run: ["solid", "#666"], removal: ["horizontal", "#333"]
  };
  var token = null;
  var state = { cursor: null, cursors: [], selected: null, historyAfter: null, lastOverview: null, position: 0 };

  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) if (Object.prototype.hasOwnProperty.call(attrs, k)) node.setAttribute(k, String(attrs[k]));
    (children || []).forEach(function (c) { node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }
  function svg(tag, attrs, children) {
    var node = document.createElementNS(SVG, tag);
    for (var k in attrs || {}) if (Object.prototype.hasOwnProperty.call(attrs, k)) node.setAttribute(k, String(attrs[k]));
    (children || []).forEach(function (c) { node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }
  function text(node, value) { node.textContent = value == null ? "" : String(value); return node; }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function ms(v) {
    if (v == null) return "\u2014";
    if (v < 1000) return Math.round(v) + " ms";
    if (v < 60000) return (v / 1000).toFixed(1) + " s";
    if (v < 3600000) return Math.floor(v / 60000) + " min " + Math.round((v % 60000) / 1000) + " s";
    return (v / 3600000).toFixed(1) + " h";
  }
  function time(ts) { return ts == null ? "\u2014" : new Date(ts).toISOString().replace("T", " ").slice(0, 23); }
  function short(id) { return id.length > 14 ? "\u2026" + id.slice(-12) : id; }
  function num(n) { return Number(n).toLocaleString("en-US"); }
  function status(message) { text($("status"), message); }

  // --- the token --------------------------------------------------------------------------------
  function readToken() {
    var match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
    if (match) {
      try { sessionStorage.setItem("hermes-dashboard-token", decodeURIComponent(match[1])); } catch (e) { token = decodeURIComponent(match[1]); }
      history.replaceState(null, "", location.pathname + location.search);
    }
    try { token = sessionStorage.getItem("hermes-dashboard-token") || token; } catch (e) { /* no storage: kept in memory */ }
  }
  function askToken(message) {
    $("token-form").hidden = false;
    status(message);
    $("token-input").focus();
  }
  $("token-entry").addEventListener("submit", function (event) {
    event.preventDefault();
    token = $("token-input").value.trim();
    try { sessionStorage.setItem("hermes-dashboard-token", token); } catch (e) { /* memory only */ }
    $("token-input").value = "";
    $("token-form").hidden = true;
    start();
  });

  function Refused(status, message) { this.status = status; this.message = message; }
  // Paths are relative to the page (its root: / for hermes-sandbox dashboard, /dashboard/ on the MCP server).
  function api(path, asBlob) {
    return fetch(path, { headers: { Authorization: "Bearer " + token }, cache: "no-store", credentials: "omit" }).then(function (res) {
      if (res.ok && asBlob) return res.blob();
      return res.json().catch(function () { return {}; }).then(function (body) {
        if (!res.ok) throw new Refused(res.status, body && body.error ? body.error : "HTTP " + res.status);
        return body;
      });
    });
  }

  // --- patterns -----------------------------------------------------------------------------------
  function defs(prefix, names) {
    var d = svg("defs");
    names.forEach(function (name) {
      var f = FILLS[name], p = svg("pattern", { id: prefix + "-" + name, width: 6, height: 6, patternUnits: "userSpaceOnUse" });
      p.appendChild(svg("rect", { width: 6, height: 6, fill: "#fff" }));
      if (f[0] === "solid") p.appendChild(svg("rect", { width: 6, height: 6, fill: f[1] }));
      if (f[0] === "diagonal" || f[0] === "cross") p.appendChild(svg("path", { d: "M0,6 L6,0 M-1,1 L1,-1 M5,7 L7,5", stroke: f[1], "stroke-width": 1.5 }));
      if (f[0] === "cross") p.appendChild(svg("path", { d: "M0,0 L6,6", stroke: f[1], "stroke-width": 1.5 }));
      if (f[0] === "dots") p.appendChild(svg("circle", { cx: 3, cy: 3, r: 1.5, fill: f[1] }));
      if (f[0] === "horizontal") p.appendChild(svg("path", { d: "M0,3 L6,3", stroke: f[1], "stroke-width": 2 }));
      if (f[0] === "vertical") p.appendChild(svg("path", { d: "M3,0 L3,6", stroke: f[1], "stroke-width": 2 }));
      d.appendChild(p);
    });
    return d;
  }
  var swatchCount = 0;
  function swatch(name) {
    var id = "sw" + (swatchCount++);
    var s = svg("svg", { width: 18, height: 12, "aria-hidden": "true", class: "swatch" });
    s.appendChild(defs(id, [name]));
    s.appendChild(svg("rect", { x: 0.5, y: 0.5, width: 17, height: 11, fill: "url(#" + id + "-" + name + ")", stroke: "#000" }));
    return s;
  }

  // --- summary and running now ------------------------------------------------------------------
  function renderSummary(o) {
    var s = o.summary, list = clear($("summary"));
    var items = [
      ["Executions", num(s.total)], ["Open", num(s.byOutcome.open)]
    ];
    OUTCOMES.forEach(function (k) { items.push([MARKS[k] + " " + k, num(s.byOutcome[k])]); });
    items.push(["Duration p50 / p95", ms(s.durationMs.p50) + " / " + ms(s.durationMs.p95)]);
    items.push(["Containers alive", num(s.containersAlive)], ["Sessions open", num(s.sessionsOpen)], ["Warm pool ready", num(s.poolReady)], ["Background processes", num(s.processesRunning)], ["Tool calls", num(s.toolCalls)]);
    if (s.untracked > 0) items.push(["Open streams not tracked", num(s.untracked)]);
    if (s.processesUntracked > 0) items.push(["Background processes not tracked", num(s.processesUntracked)]);
    items.forEach(function (it) { list.appendChild(el("div", {}, [el("dt", {}, [it[0]]), el("dd", {}, [it[1]])])); });
  }
  var DEADLINE_KINDS = { timeout: "its timeout", "max-lifetime": "maximum lifetime", idle: "idle limit", recycle: "recycled unclaimed" };
  // What else a running item has: a process's session and command (text, as recorded), a session's idle limit.
  function details(it) {
    if (it.kind === "process") {
      var parts = ["session ", el("span", { title: it.sessionId }, [short(it.sessionId)]), "; "];
      if (it.command != null) parts.push("command ", el("code", { class: "command" }, [it.command + (it.commandCut ? "\u2026" : "")]), " (" + num(it.commandBytes) + " bytes)");
      else parts.push("command not recorded (" + num(it.commandBytes) + " bytes; recordCode was off)");
      return parts;
    }
    if (it.kind === "session") return [it.idleMs != null ? "idle limit " + ms(it.idleMs) : "no idle limit recorded"];
    return [it.containerName ? short(it.containerName) : ""];
  }
  function renderRunning(o) {
    var r = o.running, body = clear($("running").tBodies[0]);
    text($("running-counts"), num(r.executions) + " executions, " + num(r.sessions) + " sessions, " + num(r.processes) + " background processes, " + num(r.pool) + " warm-pool sandboxes");
    if (r.items.length === 0) body.appendChild(el("tr", {}, [el("td", { colspan: 7 }, ["Nothing is running."])]));
    r.items.forEach(function (it) {
      var deadline = it.deadline == null ? "none recorded" : time(it.deadline) + " (" + (it.deadline >= o.now ? "in " + ms(it.deadline - o.now) : ms(o.now - it.deadline) + " ago") + (it.deadlineKind ? ", " + DEADLINE_KINDS[it.deadlineKind] : "") + ")";
      var row = el("tr", { "data-kind": it.kind }, [el("td", {}, [it.kind === "process" ? "background process" : it.kind]), el("td", { title: it.id }, [short(it.id)]), el("td", {}, [it.language || "\u2014"]), el("td", {}, [it.phase + (it.pid != null ? " (pid " + it.pid + ")" : "")]), el("td", {}, [ms(it.ageMs)]), el("td", { class: "deadline" }, [deadline]), el("td", { class: "details" }, details(it))]);
      if (it.kind === "execution") makeSelectable(row, it.id);
      body.appendChild(row);
    });
  }

  // --- charts ---------------------------------------------------------------------------------------
  var W = 600, H = 170, PAD_L = 40, PAD_B = 22;
  function axes(g, max, minutes, unit) {
    g.appendChild(svg("line", { x1: PAD_L, y1: 4, x2: PAD_L, y2: H - PAD_B, stroke: "#000" }));
    g.appendChild(svg("line", { x1: PAD_L, y1: H - PAD_B, x2: W - 4, y2: H - PAD_B, stroke: "#000" }));
    g.appendChild(svg("text", { x: PAD_L - 4, y: 12, "text-anchor": "end", "font-size": 10 }, [String(max) + unit]));
    g.appendChild(svg("text", { x: PAD_L - 4, y: H - PAD_B, "text-anchor": "end", "font-size": 10 }, ["0"]));
    if (minutes.length > 0) {
      g.appendChild(svg("text", { x: PAD_L, y: H - 6, "font-size": 10 }, [time(minutes[0]).slice(11, 16)]));
      g.appendChild(svg("text", { x: W - 4, y: H - 6, "text-anchor": "end", "font-size": 10 }, [time(minutes[minutes.length - 1]).slice(11, 16)]));
    }
  }
  function chartSvg(label) {
    return svg("svg", { viewBox: "0 0 " + W + " " + H, width: "100%", role: "img", "aria-label": label, class: "chart-svg" }, [svg("title", {}, [label])]);
  }
  function renderOutcomes(c) {
    var n = c.minutes.length, totals = {}, max = 1;
    OUTCOMES.forEach(function (k) { totals[k] = c.outcomes[k].reduce(function (a, b) { return a + b; }, 0); });
    for (var i = 0; i < n; i++) { var sum = 0; OUTCOMES.forEach(function (k) { sum += c.outcomes[k][i]; }); max = Math.max(max, sum); }
    var label = "Executions per minute by outcome over " + n + " minutes: " + OUTCOMES.map(function (k) { return k + " " + totals[k]; }).join(", ");
    var s = chartSvg(label);
    s.appendChild(defs("oc", OUTCOMES));
    var g = svg("g"); s.appendChild(g);
    axes(g, max, c.minutes, "");
    var bw = (W - PAD_L - 8) / Math.max(1, n);
    for (var j = 0; j < n; j++) {
      var y = H - PAD_B;
      OUTCOMES.forEach(function (k) {
        var v = c.outcomes[k][j];
        if (!v) return;
        var h = (v / max) * (H - PAD_B - 8);
        y -= h;
        g.appendChild(svg("rect", { x: PAD_L + 2 + j * bw, y: y, width: Math.max(1, bw - 2), height: h, fill: "url(#oc-" + k + ")", stroke: "#000", "stroke-width": 0.5, class: "bar" }, [svg("title", {}, [time(c.minutes[j]).slice(11, 16) + " " + k + ": " + v])]));
      });
    }
    var fig = $("chart-outcomes");
    clear(fig.querySelector(".chart")).appendChild(s);
    var legend = clear(fig.querySelector(".legend"));
    OUTCOMES.forEach(function (k) { legend.appendChild(el("li", {}, [swatch(k), MARKS[k] + " " + k + " (" + totals[k] + ")"])); });
  }
  function line(points, dashed) {
    var d = "", pen = false;
    points.forEach(function (p) { if (p == null) { pen = false; return; } d += (pen ? " L" : " M") + p[0].toFixed(1) + "," + p[1].toFixed(1); pen = true; });
    return svg("path", { d: d.trim() || "M0,0", fill: "none", stroke: "#000", "stroke-width": 1.6, "stroke-dasharray": dashed ? "5 3" : "none", class: "series" });
  }
  function renderPool(c) {
    var n = c.minutes.length, hits = 0, all = 0, pts = [];
    for (var i = 0; i < n; i++) {
      var claims = c.pool.claims[i], total = claims + c.pool.creates[i];
      hits += claims; all += total;
      pts.push(total === 0 ? null : [PAD_L + 2 + (i + 0.5) * ((W - PAD_L - 8) / Math.max(1, n)), H - PAD_B - (claims / total) * (H - PAD_B - 8)]);
    }
    var rate = all === 0 ? "no sandbox made" : Math.round((hits / all) * 100) + " % (" + hits + " claims of " + all + ")";
    var s = chartSvg("Warm-pool hit rate per minute: " + rate);
    var g = svg("g"); s.appendChild(g);
    axes(g, 100, c.minutes, " %");
    g.appendChild(line(pts, false));
    pts.forEach(function (p) { if (p) g.appendChild(svg("circle", { cx: p[0], cy: p[1], r: 2.5, fill: "#000", class: "point" })); });
    var fig = $("chart-pool");
    clear(fig.querySelector(".chart")).appendChild(s);
    text(fig.querySelector(".legend-text"), "Over the window: " + rate + ".");
  }
  function renderLatency(c) {
    var box = clear($("chart-latency").querySelector(".small-multiples"));
    var n = c.minutes.length;
    PHASES.forEach(function (phase) {
      var series = c.latency[phase], max = 1, last50 = null, last95 = null;
      for (var i = 0; i < n; i++) { if (series.p95[i] != null) { max = Math.max(max, series.p95[i]); last95 = series.p95[i]; } if (series.p50[i] != null) last50 = series.p50[i]; }
      var label = phase + ": latest p50 " + ms(last50) + ", p95 " + ms(last95);
      var s = chartSvg("Latency of the " + label);
      var g = svg("g"); s.appendChild(g);
      axes(g, ms(max), c.minutes, "");
      function pts(values) {
        return values.map(function (v, i) { return v == null ? null : [PAD_L + 2 + (i + 0.5) * ((W - PAD_L - 8) / Math.max(1, n)), H - PAD_B - (v / max) * (H - PAD_B - 8)]; });
      }
      var p50 = pts(series.p50), p95 = pts(series.p95);
      g.appendChild(line(p50, false));
      g.appendChild(line(p95, true));
      // Points too (a minute alone draws no line): p50 filled, p95 hollow.
      p50.forEach(function (p) { if (p) g.appendChild(svg("circle", { cx: p[0], cy: p[1], r: 2.5, fill: "#000", class: "point" })); });
      p95.forEach(function (p) { if (p) g.appendChild(svg("circle", { cx: p[0], cy: p[1], r: 3.5, fill: "none", stroke: "#000", class: "point" })); });
      box.appendChild(el("figure", { class: "phase" }, [el("figcaption", {}, [label]), s]));
    });
  }
  function renderCharts(o) {
    var c = o.charts;
    text($("charts-range"), c.minutes.length === 0 ? "No execution has ended yet." : "The journal's last " + c.minutes.length + " minutes with events, " + time(c.minutes[0]).slice(0, 16) + " to " + time(c.minutes[c.minutes.length - 1] + 60000).slice(11, 16) + " UTC.");
    renderOutcomes(c); renderPool(c); renderLatency(c);
  }

  // --- recent executions ------------------------------------------------------------------------------
  function waterfall(row) {
    var total = 0;
    PHASES.forEach(function (p) { total += row.phases[p] || 0; });
    var s = svg("svg", { width: 160, height: 14, role: "img", "aria-label": PHASES.filter(function (p) { return row.phases[p] != null; }).map(function (p) { return p + " " + ms(row.phases[p]); }).join(", ") || "no phases recorded", class: "waterfall" });
    var x = 0, id = "wf" + (swatchCount++);
    s.appendChild(defs(id, PHASES));
    PHASES.forEach(function (p) {
      var v = row.phases[p];
      if (v == null) return;
      var w = total === 0 ? 0 : (v / total) * 158;
      s.appendChild(svg("rect", { x: 1 + x, y: 1, width: Math.max(w, 1), height: 12, fill: "url(#" + id + "-" + p + ")", stroke: "#000", "stroke-width": 0.6 }, [svg("title", {}, [p + " " + ms(v)])]));
      x += w;
    });
    return s;
  }
  function makeSelectable(row, id) {
    row.className = "row";
    row.tabIndex = 0;
    row.setAttribute("data-id", id);
    row.setAttribute("aria-selected", String(state.selected === id));
    row.addEventListener("click", function () { openDetail(id, row); });
    row.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); openDetail(id, row); }
      if (event.key === "ArrowDown" && row.nextElementSibling) { event.preventDefault(); row.nextElementSibling.focus(); }
      if (event.key === "ArrowUp" && row.previousElementSibling) { event.preventDefault(); row.previousElementSibling.focus(); }
    });
  }
  function renderExecutions(page) {
    var focused = document.activeElement && document.activeElement.getAttribute ? document.activeElement.getAttribute("data-id") : null;
    var body = clear($("executions").tBodies[0]);
    if (page.rows.length === 0) body.appendChild(el("tr", {}, [el("td", { colspan: 8 }, ["No execution has ended yet."])]));
    page.rows.forEach(function (r) {
      var outcome = MARKS[r.outcome] + " " + r.outcome + (r.exitCode != null && r.outcome !== "ok" ? " (exit " + r.exitCode + ")" : "") + (r.errorTag ? " " + r.errorTag : "");
      var row = el("tr", {}, [
        el("td", { title: r.id }, [short(r.id)]), el("td", {}, [r.language || "\u2014"]), el("td", { class: "outcome" }, [outcome]),
        el("td", {}, [ms(r.durationMs)]), el("td", {}, [waterfall(r)]), el("td", {}, [String(r.toolCalls)]), el("td", {}, [String(r.files)]),
        el("td", {}, [time(r.finishedAt)])
      ]);
      makeSelectable(row, r.id);
      body.appendChild(row);
      if (focused === r.id) row.focus();
    });
    text($("page-info"), page.kept === 0 ? "" : "Showing " + page.rows.length + " of the " + num(page.kept) + " most recent" + (state.cursors.length > 0 ? " (older page " + state.cursors.length + ")" : ""));
    $("older").disabled = page.before == null;
    $("newest").disabled = state.cursors.length === 0;
    state.nextBefore = page.before;
  }
  function loadExecutions() {
    return api("api/executions?limit=25" + (state.cursor == null ? "" : "&before=" + state.cursor)).then(renderExecutions);
  }
  $("older").addEventListener("click", function () {
    if (state.nextBefore == null) return;
    state.cursors.push(state.cursor);
    state.cursor = state.nextBefore;
    loadExecutions();
  });
  $("newest").addEventListener("click", function () { state.cursors = []; state.cursor = null; loadExecutions(); });
  (function () {
    var legend = $("phase-legend");
    PHASES.forEach(function (p) { legend.appendChild(swatch(p)); legend.appendChild(document.createTextNode(p + " ")); });
  })();

  // --- one execution's history -------------------------------------------------------------------------
  var opener = null;
  function dl(pairs) {
    var list = el("dl");
    pairs.forEach(function (p) { list.appendChild(el("dt", {}, [p[0]])); list.appendChild(el("dd", {}, [p[1]])); });
    return list;
  }
  function value(v) { return typeof v === "string" ? v : JSON.stringify(v); }
  function eventItem(e) {
    var head = el("div", {}, ["#" + e.sequence + " " + time(e.timestamp) + " ", el("span", { class: "type" }, [e.type])]);
    var item = el("li", { "data-type": e.type }, [head]);
    var data = e.data || {};
    if (e.type === "CodeRecorded") {
      item.appendChild(el("p", {}, ["Code (" + num(data.codeBytes) + " bytes" + (data.truncated ? ", its head only" : "") + "):"]));
      item.appendChild(el("pre", { class: "code" }, [String(data.code)]));
      return item;
    }
    if (e.type === "OutputRecorded") {
      item.appendChild(el("p", {}, ["stdout (" + num(data.stdoutBytes) + " bytes" + (data.truncated ? "; heads only" : "") + "):"]));
      item.appendChild(el("pre", { class: "stdout" }, [String(data.stdout)]));
      item.appendChild(el("p", {}, ["stderr (" + num(data.stderrBytes) + " bytes):"]));
      item.appendChild(el("pre", { class: "stderr" }, [String(data.stderr)]));
      return item;
    }
    var pairs = Object.keys(data).map(function (k) { return [k, value(data[k])]; });
    if (pairs.length > 0) item.appendChild(dl(pairs));
    return item;
  }
  function renderDetail(d) {
    var r = d.row, body = clear($("detail-body"));
    text($("detail-h"), (d.kind === "execution" ? "Execution " : "Stream ") + d.id);
    body.appendChild(dl([
      ["Outcome", d.phase === "destroyed" || r.finishedAt != null ? MARKS[r.outcome] + " " + r.outcome : "running (" + d.phase + ")"],
      ["Language", r.language || "\u2014"], ["Container", d.containerName || "\u2014"],
      ["Duration", ms(r.durationMs)],
      ["Phases", PHASES.filter(function (p) { return r.phases[p] != null; }).map(function (p) { return p + " " + ms(r.phases[p]); }).join(", ") || "\u2014"],
      ["Code and output", d.recorded.length > 0 ? "recorded (below, in the history)" : "not recorded (recordCode was off)"]
    ]));
    body.appendChild(el("h3", {}, ["Tool calls (" + (d.toolCalls.length + d.toolCallsOmitted) + ")"]));
    if (d.toolCalls.length > 0) {
      var tb = el("tbody");
      d.toolCalls.forEach(function (c) { tb.appendChild(el("tr", {}, [el("td", {}, [String(c.callId)]), el("td", { class: "tool" }, [c.tool]), el("td", {}, [c.outcome || "in flight"]), el("td", {}, [c.reason || ""]), el("td", {}, [ms(c.durationMs)])])); });
      body.appendChild(el("table", { class: "tool-calls" }, [el("thead", {}, [el("tr", {}, ["Call", "Tool", "Outcome", "Reason", "Duration"].map(function (h) { return el("th", { scope: "col" }, [h]); }))]), tb]));
    }
    body.appendChild(el("h3", {}, ["Files collected (" + (d.files.length + d.filesOmitted) + ", " + d.skipped + " skipped)"]));
    if (d.files.length > 0) {
      var fb = el("tbody"), shown = 0;
      d.files.forEach(function (f) {
        var content = el("td", { class: "content" });
        if (d.store !== "here") text(content, "not held by this process");
        else if (!f.held) text(content, "no longer held");
        else if (!f.image) text(content, "held (not an image)");
        else if (shown >= MAX_IMAGES) text(content, "held (" + MAX_IMAGES + " images shown at most)");
        else { shown++; showImage(content, d.id, f.path); }
        fb.appendChild(el("tr", {}, [el("td", { class: "path" }, [f.path]), el("td", {}, [num(f.size) + " bytes"]), el("td", {}, [f.mime]), content]));
      });
      body.appendChild(el("table", { class: "files" }, [el("thead", {}, [el("tr", {}, ["Path", "Size", "Type", "Content"].map(function (h) { return el("th", { scope: "col" }, [h]); }))]), fb]));
      if (d.store !== "here") body.appendChild(el("p", { class: "note" }, ["The images themselves are held by the MCP server's artifact store for a while: open the dashboard it serves (hermes-sandbox mcp --http --dashboard) to see them."]));
    }
    if (d.violations.length > 0) body.appendChild(el("p", {}, ["Lifecycle violations: " + d.violations.join("; ")]));
  }
  // An image the artifact store holds: fetched with the token (an <img src> cannot send it) into a blob URL.
  var MAX_IMAGES = 12, blobs = [];
  function forgetImages() { blobs.forEach(function (u) { URL.revokeObjectURL(u); }); blobs = []; }
  function showImage(cell, id, path) {
    text(cell, "loading\u2026");
    api("api/executions/" + encodeURIComponent(id) + "/files/" + encodeURIComponent(path), true).then(function (blob) {
      if (state.selected !== id) return;
      var url = URL.createObjectURL(blob);
      blobs.push(url);
      clear(cell).appendChild(el("img", { class: "collected", src: url, alt: "the collected image " + path }));
    }, function (err) { text(cell, "not shown: " + err.message); });
  }
  function loadHistory(id) {
    return api("api/executions/" + encodeURIComponent(id) + "/events?limit=50" + (state.historyAfter ? "&after=" + state.historyAfter : "")).then(function (page) {
      if (state.selected !== id) return;
      var list = $("history");
      page.events.forEach(function (e) { list.appendChild(eventItem(e)); });
      state.historyAfter = page.after;
      $("history-more").hidden = page.after == null;
    });
  }
  function openDetail(id, from) {
    opener = from || null;
    forgetImages();
    state.selected = id;
    state.historyAfter = null;
    Array.prototype.forEach.call(document.querySelectorAll("tr.row"), function (r) { r.setAttribute("aria-selected", String(r.getAttribute("data-id") === id)); });
    clear($("history"));
    var section = $("detail");
    section.hidden = false;
    text($("detail-h"), "Execution " + id);
    api("api/executions/" + encodeURIComponent(id)).then(function (d) {
      if (state.selected !== id) return;
      renderDetail(d);
      return loadHistory(id);
    }).then(function () { section.focus(); }, function (err) { text($("detail-body"), "Cannot show it: " + err.message); section.focus(); });
  }
  function closeDetail() {
    $("detail").hidden = true;
    forgetImages();
    state.selected = null;
    Array.prototype.forEach.call(document.querySelectorAll("tr.row"), function (r) { r.setAttribute("aria-selected", "false"); });
    if (opener && document.body.contains(opener)) opener.focus();
  }
  $("detail-close").addEventListener("click", closeDetail);
  $("detail").addEventListener("keydown", function (event) { if (event.key === "Escape") closeDetail(); });
  $("history-more").addEventListener("click", function () { if (state.selected) loadHistory(state.selected); });

  // --- live --------------------------------------------------------------------------------------------
  function refresh() {
    return api("api/overview").then(function (o) {
      state.lastOverview = o;
      state.position = o.position;
      renderSummary(o); renderRunning(o); renderCharts(o);
      var catching = o.position < o.target ? "catching up: event " + num(o.position) + " of " + num(o.target) : "live at event " + num(o.position);
      status((o.failure ? o.failure + " \u2014 " : "") + "Journal " + o.journal + ", " + catching + ", updated " + time(o.now).slice(11, 19) + " UTC");
      document.body.setAttribute("data-position", String(o.position));
      return state.cursor == null ? loadExecutions() : null;
    });
  }
  function sleep(t) { return new Promise(function (resolve) { setTimeout(resolve, t); }); }
  var running = false;
  function start() {
    if (running) return;
    running = true;
    var last = 0;
    (function loop() {
      var wait = Math.max(0, 1000 - (Date.now() - last));
      sleep(wait).then(function () { last = Date.now(); return refresh(); })
        .then(function () { return api("api/wait?after=" + state.position); })
        .then(loop, function (err) {
          if (err instanceof Refused && err.status === 401) { running = false; token = null; try { sessionStorage.removeItem("hermes-dashboard-token"); } catch (e) { /* none */ } askToken("The token was refused: " + err.message); return; }
          status("Disconnected (" + (err && err.message ? err.message : String(err)) + "); retrying in 3 s");
          sleep(3000).then(loop);
        });
    })();
  }

  readToken();
  if (token) start(); else askToken("No token: open the address the dashboard printed (with #token=...), or paste the token.");
})();
`
