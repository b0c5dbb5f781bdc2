// Cellar's web UI. Every page renders from the server's JSON (/status, /api/regions,
// /api/server) and polls it; nothing is loaded from anywhere else. docs/web-ui.md.
"use strict";

const params = new URLSearchParams(location.search);
// Milliseconds between polls (`?interval=500` for a faster page).
const INTERVAL = Math.max(200, Number(params.get("interval")) || 2000);
// Samples the charts keep.
const KEPT = 90;

const $ = (id) => document.getElementById(id);

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  }[c]));
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(n) || 0;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return (u === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + units[u];
}

function count(n) {
  return (Number(n) || 0).toLocaleString("en-US");
}

function rate(n) {
  const v = Number(n) || 0;
  return v >= 100 ? v.toFixed(0) : v.toFixed(1);
}

function duration(ms) {
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  return (d ? d + "d " : "") + (d || h ? h + "h " : "") + m + "m " + (s % 60) + "s";
}

// A number a test or a reader can find: its key, exact value and shown text.
function val(key, value, shown) {
  return `<span data-k="${esc(key)}" data-v="${esc(value)}">${esc(shown === undefined ? value : shown)}</span>`;
}

function card(label, key, value, shown) {
  return `<div class="card"><dt>${esc(label)}</dt><dd>${val(key, value, shown)}</dd></div>`;
}

// Another server's page or JSON: same scheme as this page.
function serverUrl(http, path) {
  return `${location.protocol}//${http}${path}`;
}

async function getJSON(url) {
  const r = await fetch(url, { cache: "no-store" });
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status} ${(await r.text()).trim()}`);
  return r.json();
}

// ---- rates and charts -------------------------------------------------------------------

// Counters sampled over time, turned into per-second rates.
class Series {
  constructor(names) { this.names = names; this.samples = []; }
  add(values) {
    this.samples.push({ t: performance.now(), values });
    if (this.samples.length > KEPT + 1) this.samples.shift();
  }
  // Per-second rates between consecutive samples: one array per name.
  rates() {
    const out = this.names.map(() => []);
    for (let i = 1; i < this.samples.length; i++) {
      const a = this.samples[i - 1], b = this.samples[i];
      const dt = Math.max(1e-3, (b.t - a.t) / 1000);
      this.names.forEach((_, k) => out[k].push(Math.max(0, (b.values[k] - a.values[k]) / dt)));
    }
    return out;
  }
  latest() { return this.rates().map((r) => (r.length ? r[r.length - 1] : 0)); }
}

const COLORS = ["#6b2d5c", "#1f77b4", "#2ca02c", "#ff7f0e"];

function chartHtml(id, names) {
  const legend = names.map((n, i) =>
    `<span><i style="background:${COLORS[i]}"></i>${esc(n)}: ${val(id + "." + n, "0", "0")}/s</span>`).join("");
  return `<div class="chart"><div class="legend" id="${id}-legend">${legend}</div>` +
    `<canvas id="${id}" data-points="0"></canvas></div>`;
}

function drawChart(id, series) {
  const canvas = $(id);
  if (!canvas) return;
  const rates = series.rates();
  const latest = series.latest();
  series.names.forEach((n, i) => {
    const el = document.querySelector(`[data-k="${CSS.escape(id + "." + n)}"]`);
    if (el) { el.dataset.v = String(latest[i]); el.textContent = rate(latest[i]); }
  });
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 600, h = canvas.clientHeight || 180;
  canvas.width = w * dpr; canvas.height = h * dpr;
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  g.clearRect(0, 0, w, h);
  const max = Math.max(1, ...rates.flat());
  const left = 48, bottom = h - 16, top = 8;
  g.strokeStyle = "#e4e0ea"; g.fillStyle = "#6d6875"; g.font = "11px system-ui, sans-serif";
  for (let k = 0; k <= 2; k++) {
    const y = top + (bottom - top) * k / 2;
    g.beginPath(); g.moveTo(left, y); g.lineTo(w, y); g.stroke();
    g.fillText(rate(max * (1 - k / 2)), 4, y + 4);
  }
  g.fillText(`last ${Math.round(KEPT * INTERVAL / 1000)} s`, left, h - 2);
  rates.forEach((r, i) => {
    if (r.length < 1) return;
    g.strokeStyle = COLORS[i]; g.lineWidth = 1.8; g.beginPath();
    r.forEach((v, j) => {
      const x = left + (w - left) * (KEPT - r.length + j + 1) / KEPT;
      const y = bottom - (bottom - top) * v / max;
      if (j === 0) g.moveTo(x, y); else g.lineTo(x, y);
    });
    g.stroke();
  });
  canvas.dataset.points = String(rates.length ? rates[0].length : 0);
}

// ---- pages -------------------------------------------------------------------------------

function serverCell(name, http, here) {
  const shown = name || "(this server)";
  if (!http || http === here) return `<a href="/server">${esc(shown)}</a>`;
  return `<a href="${esc(serverUrl(http, "/server"))}">${esc(shown)}</a>`;
}

// The overview: this node's numbers, every server of the cluster, every table.
const overview = {
  series: new Series(["calls", "reads", "writes"]),
  built: false,
  perServer: new Map(),
  async refresh() {
    const [status, regions] = await Promise.all([getJSON("/status"), getJSON("/api/regions")]);
    const here = status.listen.http;
    const others = status.servers.filter((s) => s.http && s.http !== here);
    // In a cluster, each region server's own numbers come from its /status.
    const remote = await Promise.all(others.map((s) =>
      getJSON(serverUrl(s.http, "/status")).then((v) => [s.http, v], (e) => [s.http, { error: e.message }])));
    const all = [status, ...remote.map(([, v]) => v).filter((v) => !v.error)];
    const sum = (f) => all.reduce((a, v) => a + (Number(f(v)) || 0), 0);
    const calls = sum((v) => v.rpc.calls + (v.hbase ? v.hbase.calls : 0));
    this.series.add([calls, sum((v) => v.gauges.read_requests), sum((v) => v.gauges.write_requests)]);

    const cacheHits = sum((v) => v.gauges.block_cache_hits);
    const cacheLookups = cacheHits + sum((v) => v.gauges.block_cache_misses);
    const ratio = cacheLookups ? cacheHits / cacheLookups : 0;
    if (!this.built) {
      $("main").innerHTML = `<h1>${esc(status.role)} · Cellar ${esc(status.version)}</h1>
        <dl class="cards" id="cards"></dl>
        <h2>Request rates</h2>${chartHtml("rates", this.series.names)}
        <h2>Servers</h2><div id="servers"></div><div id="dead"></div>
        <h2>Tables</h2><div id="tables"></div>`;
      this.built = true;
    }
    $("cards").innerHTML = [
      card("Uptime", "uptime_ms", status.uptime_ms, duration(status.uptime_ms)),
      card("Servers", "servers", status.servers.filter((s) => s.name !== "(not open)").length),
      card("Regions", "regions", sum((v) => Object.values(v.gauges.regions_per_table).reduce((a, b) => a + b, 0))),
      card("Calls", "calls", calls, count(calls)),
      card("Memstore", "memstore_bytes", sum((v) => v.gauges.memstore_bytes), bytes(sum((v) => v.gauges.memstore_bytes))),
      card("Store files", "store_files", sum((v) => v.gauges.store_files)),
      card("Store file size", "store_file_bytes", sum((v) => v.gauges.store_file_bytes), bytes(sum((v) => v.gauges.store_file_bytes))),
      card("Block cache hit ratio", "block_cache_hit_ratio", ratio, (ratio * 100).toFixed(1) + " %"),
      card("Flush queue", "flush_queue", sum((v) => v.gauges.flush_queue)),
      card("Compaction queue", "compaction_queue", sum((v) => v.gauges.compaction_queue)),
      card("Connections", "open_connections", sum((v) => v.rpc.open_connections + (v.hbase ? v.hbase.open_connections : 0))),
      card("WAL", "wal_state", status.wal.state),
      card("Root", "root", status.root),
    ].join("");
    drawChart("rates", this.series);

    // Servers: this one when standalone, else every region server the master lists.
    const rows = (status.servers.length ? status.servers : [{ name: status.server, http: here, regions: [] }]).map((s) => {
      const v = s.http === here || !s.http ? status : (remote.find(([h]) => h === s.http) || [0, null])[1];
      const key = s.http || here;
      let series = this.perServer.get(key);
      if (!series) { series = new Series(["calls"]); this.perServer.set(key, series); }
      if (v && !v.error) series.add([v.rpc.calls + (v.hbase ? v.hbase.calls : 0)]);
      const err = v && v.error ? `<span class="state-bad">unreachable: ${esc(v.error)}</span>` : "";
      return `<tr data-server="${esc(s.name || status.server)}"><td>${serverCell(s.name || status.server, s.http, here)}</td>
        <td>${esc(s.native || status.listen.native)}</td>
        <td class="num">${val("server.regions", s.regions.length)}</td>
        <td class="num">${v && !v.error ? val("server.calls_per_s", series.latest()[0], rate(series.latest()[0])) : err}</td>
        <td class="num">${v && !v.error ? bytes(v.gauges.memstore_bytes) : ""}</td>
        <td class="num">${v && !v.error ? bytes(v.gauges.store_file_bytes) : ""}</td></tr>`;
    }).join("");
    $("servers").innerHTML = `<table><tr><th>Server</th><th>Native address</th><th class="num">Regions</th>
      <th class="num">Calls/s</th><th class="num">Memstore</th><th class="num">Store file size</th></tr>${rows}</table>`;
    // A cluster's master: the region servers it saw that are gone, as HBase's status lists them.
    const dead = status.dead_servers || [];
    $("dead").innerHTML = status.role !== "master" ? "" : `<h3>${val("dead_servers", dead.length)} dead servers</h3>` +
      (dead.length ? `<table><tr><th>Server</th><th>Native address</th><th>HTTP address</th></tr>${dead.map((s) =>
        `<tr><td>${val("dead.name", s.name)}</td><td>${val("dead.native", s.native)}</td><td>${val("dead.http", s.http)}</td></tr>`).join("")}</table>` : "");

    const tables = regions.tables.map((t) => {
      const local = t.regions.filter((r) => r.open_here);
      const size = local.reduce((a, r) => a + r.store_file_bytes, 0);
      const mem = local.reduce((a, r) => a + r.memstore_bytes, 0);
      // Sizes only when every region is open here; a cluster's table page asks their servers.
      const here = local.length === t.regions.length;
      const elsewhere = '<span class="muted">see the table</span>';
      return `<tr data-table="${esc(t.name)}"><td><a href="/table/${encodeURIComponent(t.name)}">${esc(t.name)}</a></td>
        <td>${t.enabled ? "enabled" : "disabled"}</td>
        <td class="num">${val("table.regions", t.regions.length)}</td>
        <td>${esc(t.families.join(", "))}</td>
        <td class="num">${here ? val("table.store_file_bytes", size, bytes(size)) : elsewhere}</td>
        <td class="num">${here ? val("table.memstore_bytes", mem, bytes(mem)) : elsewhere}</td></tr>`;
    }).join("");
    $("tables").innerHTML = `<table><tr><th>Table</th><th>State</th><th class="num">Regions</th><th>Families</th>
      <th class="num">Store file size</th><th class="num">Memstore</th></tr>${tables}</table>`;
    $("who").textContent = `${status.role} ${status.server || status.listen.native}`;
  },
};

// What a region's read and write counts are: its server's since it last opened there, as
// HBase's are. An alter, a move, a split or a restart reopens it and its counts start again.
const SINCE_OPENED = "counted by the region's server since the region last opened there; "
  + "an alter, a move or a restart reopens it and the count starts again at 0";

// A table: its regions, where each is, its size and request rates.
const tablePage = {
  name: decodeURIComponent(location.pathname.slice("/table/".length)),
  series: new Series(["reads", "writes"]),
  perRegion: new Map(),
  built: false,
  async refresh() {
    const q = "/api/regions?table=" + encodeURIComponent(this.name);
    const mine = await getJSON(q);
    const t = mine.tables[0];
    if (!t) throw new Error(`table '${this.name}' does not exist`);
    // Regions held elsewhere: their numbers come from the server holding them.
    const servers = [...new Set(t.regions.filter((r) => !r.open_here && r.server_http).map((r) => r.server_http))];
    const loads = new Map();
    const failed = [];
    await Promise.all(servers.map((http) => getJSON(serverUrl(http, q)).then((v) => {
      for (const tt of v.tables) for (const r of tt.regions) if (r.open_here) loads.set(r.name, r);
    }, (e) => failed.push(`${http}: ${e.message}`))));
    const regions = t.regions.map((r) => (r.open_here ? r : Object.assign({}, r, loads.get(r.name) || {})));
    const known = regions.filter((r) => r.read_requests !== undefined);
    this.series.add([known.reduce((a, r) => a + r.read_requests, 0), known.reduce((a, r) => a + r.write_requests, 0)]);
    if (!this.built) {
      document.title = `${this.name} · Cellar`;
      $("main").innerHTML = `<h1>Table ${esc(this.name)}</h1><dl class="cards" id="cards"></dl>
        <h2>Request rates</h2>${chartHtml("rates", this.series.names)}
        <h2>Regions</h2><div id="regions"></div><p class="muted" id="unreachable"></p>`;
      this.built = true;
    }
    const size = known.reduce((a, r) => a + r.store_file_bytes, 0);
    $("cards").innerHTML = [
      card("State", "enabled", t.enabled, t.enabled ? "enabled" : "disabled"),
      card("Regions", "regions", regions.length),
      card("Families", "families", t.families.join(", ")),
      card("Store files", "store_files", known.reduce((a, r) => a + r.store_files, 0)),
      card("Store file size", "store_file_bytes", size, bytes(size)),
      card("Memstore", "memstore_bytes", known.reduce((a, r) => a + r.memstore_bytes, 0),
        bytes(known.reduce((a, r) => a + r.memstore_bytes, 0))),
    ].join("");
    drawChart("rates", this.series);
    const rows = regions.map((r) => {
      let s = this.perRegion.get(r.name);
      if (!s) { s = new Series(["reads", "writes"]); this.perRegion.set(r.name, s); }
      const has = r.read_requests !== undefined;
      if (has) s.add([r.read_requests, r.write_requests]);
      const [rr, wr] = s.latest();
      const n = (k, v, shown) => `<td class="num">${has ? val(k, v, shown) : ""}</td>`;
      return `<tr data-region="${esc(r.name)}"><td class="key">${esc(r.name)}</td>
        <td class="key">${val("region.start_key", r.start_key)}</td><td class="key">${val("region.end_key", r.end_key)}</td>
        <td>${serverCell(r.server, r.server_http, location.host)}</td><td>${esc(r.state)}</td>
        ${n("region.store_file_bytes", r.store_file_bytes, bytes(r.store_file_bytes))}
        ${n("region.store_files", r.store_files)}
        ${n("region.memstore_bytes", r.memstore_bytes, bytes(r.memstore_bytes))}
        ${n("region.read_requests", r.read_requests, count(r.read_requests))}
        ${n("region.write_requests", r.write_requests, count(r.write_requests))}
        ${n("region.reads_per_s", rr, rate(rr))}${n("region.writes_per_s", wr, rate(wr))}</tr>`;
    }).join("");
    $("regions").innerHTML = `<table><tr><th>Region</th><th>Start key</th><th>End key</th><th>Server</th><th>State</th>
      <th class="num">Size</th><th class="num">Store files</th><th class="num">Memstore</th>
      <th class="num" title="${SINCE_OPENED}">Reads since opened</th><th class="num" title="${SINCE_OPENED}">Writes since opened</th>
      <th class="num">Reads/s</th><th class="num">Writes/s</th></tr>${rows}</table>`;
    $("unreachable").textContent = failed.length ? "Not reachable: " + failed.join("; ") : "";
    $("who").textContent = mine.server;
  },
};

// This server: handlers, queues, scanners, slow calls, the WAL and recent log lines.
const serverPage = {
  series: new Series(["calls"]),
  built: false,
  async refresh() {
    const [status, s] = await Promise.all([getJSON("/status"), getJSON("/api/server")]);
    const h = s.handlers;
    const calls = h.native.calls + (h.hbase ? h.hbase.calls : 0);
    this.series.add([calls]);
    if (!this.built) {
      $("main").innerHTML = `<h1>Server ${esc(s.server || status.listen.native)}</h1><dl class="cards" id="cards"></dl>
        <h2>Request rate</h2>${chartHtml("rates", this.series.names)}
        <h2>Handlers and queues</h2><div id="handlers"></div>
        <h2>Write-ahead log</h2><dl class="cards" id="wal"></dl>
        <h2>Slow calls</h2><div id="slow"></div>
        <h2>Recent log lines</h2><pre class="log" id="log"></pre>`;
      this.built = true;
    }
    const ok = s.wal.state === "ok";
    $("cards").innerHTML = [
      card("Role", "role", s.role),
      card("Version", "version", status.version),
      card("Uptime", "uptime_ms", status.uptime_ms, duration(status.uptime_ms)),
      card("Native address", "native", status.listen.native),
      card("Handlers", "handlers", h.count),
      card("Open scanners", "open_scanners", s.open_scanners),
      card("Prepared scans", "prepared_scans_open", s.prepared_scans_open),
      card("Flush queue", "flush_queue", s.queues.flush),
      card("Compaction queue", "compaction_queue", s.queues.compaction),
      card("Memstore", "memstore_bytes", status.gauges.memstore_bytes, bytes(status.gauges.memstore_bytes)),
    ].join("");
    drawChart("rates", this.series);
    const front = (name, f) => (f ? `<tr><td>${name}</td><td class="num">${val(name + ".handlers_busy", f.handlers_busy)}</td>
      <td class="num">${val(name + ".call_queue_length", f.call_queue_length)}</td>
      <td class="num">${val(name + ".open_connections", f.open_connections)}</td>
      <td class="num">${val(name + ".calls", f.calls, count(f.calls))}</td>
      <td class="num">${val(name + ".slow_calls", f.slow_calls)}</td></tr>` : "");
    $("handlers").innerHTML = `<p class="muted">${h.count} handler threads shared by both front ends, at most
      ${h.max_queued_calls} calls queued, ${h.io_threads} reactor threads.</p>
      <table><tr><th>Front end</th><th class="num">Busy handlers</th><th class="num">Queued calls</th>
      <th class="num">Connections</th><th class="num">Calls</th><th class="num">Slow calls</th></tr>
      ${front("native", h.native)}${front("hbase", h.hbase)}</table>`;
    $("wal").innerHTML = [
      `<div class="card"><dt>State</dt><dd class="${ok ? "state-ok" : "state-bad"}">${val("wal.state", s.wal.state)}</dd></div>`,
      card("Failures", "wal.failures", s.wal.failures),
      card("Recoveries", "wal.recoveries", s.wal.recoveries),
      card("Buffered", "wal.buffered_bytes", s.wal.buffered_bytes, bytes(s.wal.buffered_bytes)),
    ].join("") + (s.wal.problem ? `<p class="state-bad">${esc(s.wal.problem)}</p>` : "");
    const slow = s.slow_calls.map((c) => `<tr data-slow="${esc(c.method)}"><td>${esc(new Date(c.at_ms).toISOString())}</td>
      <td>${esc(c.front)}</td><td>${esc(c.method)}</td><td class="num">${esc(c.duration_ms.toFixed(1))}</td>
      <td>${c.failed ? "failed" : ""}</td></tr>`).join("");
    $("slow").innerHTML = s.slow_call_ms === 0
      ? '<p class="muted">The slow-call log is off (rpc.slow_call_ms = 0).</p>'
      : `<p class="muted">Calls over ${esc(s.slow_call_ms)} ms, newest first.</p>` +
        (slow ? `<table><tr><th>Answered</th><th>Front end</th><th>Method</th><th class="num">ms</th><th></th></tr>${slow}</table>`
          : '<p>None so far.</p>');
    const log = $("log");
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.textContent = s.log.join("\n");
    log.dataset.lines = String(s.log.length);
    if (atBottom) log.scrollTop = log.scrollHeight;
    $("who").textContent = `${s.role} ${s.server}`;
  },
};

// ---- the loop ----------------------------------------------------------------------------

function pageFor(path) {
  if (path === "/" || path === "") return overview;
  if (path === "/server") return serverPage;
  if (path.startsWith("/table/")) return tablePage;
  return null;
}

let updates = 0;

async function tick(page) {
  try {
    await page.refresh();
    updates++;
    document.body.dataset.updates = String(updates);
    $("updated").textContent = "updated " + new Date().toLocaleTimeString("en-GB");
    $("error").hidden = true;
  } catch (e) {
    // Shown on the page and kept polling: a restarting server comes back by itself.
    $("error").hidden = false;
    $("error").textContent = "Cannot load: " + e.message;
    console.warn("cellar ui:", e.message);
  }
  setTimeout(() => tick(page), INTERVAL);
}

document.addEventListener("DOMContentLoaded", () => {
  const page = pageFor(location.pathname);
  if (page) tick(page);
});
