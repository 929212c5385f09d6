// cloudtrain ui: the jobs of every provider, one page. Plain JavaScript, no build step, nothing
// loaded from elsewhere. Every text from the server goes in through textContent (never HTML).
"use strict";

const CSRF = document.querySelector('meta[name="csrf"]').content;
const COLORS = ["#0b63ce", "#d9480f", "#2b8a3e", "#862e9c", "#c92a2a", "#5c940d", "#1098ad", "#e67700"];
const REFRESH_MS = 2000;
let openHandle = null;
let logSource = null;
const asked = {jobs: 0, costs: 0, resources: 0};  // an answer to an older question is dropped

async function latest(kind, url) {
  const ticket = ++asked[kind];
  const data = await getJSON(url);
  return ticket === asked[kind] ? data : null;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text != null) node.textContent = text;
  return node;
}

async function getJSON(url, options) {
  const response = await fetch(url, Object.assign({credentials: "same-origin"}, options || {}));
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function when(t) {
  if (!t) return "-";
  const d = new Date(t * 1000);
  return d.toLocaleDateString(undefined, {month: "short", day: "numeric"}) + " " +
    d.toLocaleTimeString(undefined, {hour: "2-digit", minute: "2-digit", second: "2-digit"});
}

function money(value, currency) {
  if (value == null) return "-";
  return value.toFixed(value < 10 ? 2 : 0) + " " + (currency || "USD");
}

// ---- jobs -----------------------------------------------------------------------------------
function filters() {
  const q = new URLSearchParams();
  for (const [id, key] of [["f-provider", "provider"], ["f-state", "state"], ["f-since", "since"], ["f-text", "q"]]) {
    const v = document.getElementById(id).value.trim();
    if (v) q.set(key, v);
  }
  return q;
}

function stateBadge(state) {
  return el("span", {class: "state s-" + state, "data-state": state}, state);
}

function jobCells(j) {
  const provider = j.emulated ? `${j.provider} (${j.emulated})` : j.provider;
  const nodes = (j.nodes || 1) + " × " + (j.instance_type || "-") + (j.spot ? " spot" : "");
  return [j.name || j.job_id, provider, null, nodes, String(j.restarts || 0), when(j.started_at), j.duration_text,
    j.rate == null ? "-" : money(j.rate, j.currency), money(j.cost, j.currency)];
}

function newJobRow(j) {
  const tr = el("tr", {"data-handle": j.handle});
  jobCells(j).forEach((text, i) => tr.append(el("td", {class: [4, 6, 7, 8].includes(i) ? "num" : (i === 2 ? "state-cell" : "")})));
  tr.addEventListener("click", () => openJob(j.handle));
  return tr;
}

// A row is updated where it stands, and only the cells whose text changed: the table refreshes
// every 2 s, and a user reading or selecting a row must not have it replaced under them.
function fillJobRow(tr, j) {
  const cells = tr.children;
  jobCells(j).forEach((text, i) => {
    if (i === 2) {
      const key = j.state + "\u0000" + (j.message || "");
      if (cells[2].dataset.key !== key) {
        cells[2].dataset.key = key;
        cells[2].replaceChildren(stateBadge(j.state), j.message ? el("span", {class: "reason"}, j.message) : "");
      }
    } else if (cells[i].textContent !== text) {
      cells[i].textContent = text;
    }
  });
}

function showJobs(body, jobs) {
  const rows = new Map([...body.children].map(tr => [tr.dataset.handle, tr]));
  let before = body.firstChild;
  for (const j of jobs) {
    let tr = rows.get(j.handle);
    rows.delete(j.handle);
    if (!tr) tr = newJobRow(j);
    fillJobRow(tr, j);
    if (tr !== before) body.insertBefore(tr, before); else before = before.nextSibling;
  }
  for (const gone of rows.values()) gone.remove();
}

async function loadJobs() {
  const data = await latest("jobs", "/api/jobs?" + filters().toString());
  if (!data) return;
  const body = document.querySelector("#jobs tbody");
  showJobs(body, data.jobs);
  if (!window.__firstRows && data.jobs.length) {  // bench/bench_ui.py reads when the first rows were drawn
    window.__firstRows = true;
    requestAnimationFrame(() => performance.mark("cloudtrain-first-rows"));
  }
  document.getElementById("jobs-count").textContent = data.more
    ? `the newest ${data.jobs.length} jobs (more match: narrow the filters)` : `${data.jobs.length} jobs`;
  const select = document.getElementById("f-provider");
  const known = new Set([...select.options].map(o => o.value));
  for (const p of data.providers) if (!known.has(p)) select.append(el("option", {}, p));
  document.getElementById("updated").textContent = "updated " + new Date(data.now * 1000).toLocaleTimeString();
  if (openHandle) {
    const j = data.jobs.find(x => x.handle === openHandle);
    if (j) showState(j);
  }
}

async function loadCosts() {
  const since = document.getElementById("f-since").value;
  const data = await latest("costs", "/api/costs" + (since ? "?since=" + encodeURIComponent(since) : ""));
  if (data) drawCosts(data);
}

function drawCosts(data) {
  const chart = document.getElementById("cost-chart");
  chart.replaceChildren();
  const W = +chart.getAttribute("width"), H = +chart.getAttribute("height"), L = 40, B = 22;
  const days = [...new Set(data.days.map(d => d.day))];
  const series = [...new Set(data.days.map(d => d.provider + " " + d.currency))];
  if (!days.length) {
    chart.append(svg("text", {x: 10, y: H / 2}, "no priced jobs yet (a job's cost needs a catalog price)"));
  } else {
    const stacks = days.map(day => data.days.filter(d => d.day === day));
    const max = Math.max(...stacks.map(s => s.reduce((a, d) => a + d.cost, 0)), 1e-9);
    const bw = Math.min(40, (W - L - 10) / days.length - 6);
    chart.append(svg("line", {x1: L, y1: H - B, x2: W, y2: H - B, stroke: "#999"}));
    chart.append(svg("text", {x: 2, y: 12}, max.toFixed(2)));
    days.forEach((day, i) => {
      const x = L + 4 + i * (bw + 6);
      let y = H - B;
      for (const d of stacks[i]) {
        const h = (H - B - 14) * d.cost / max;
        y -= h;
        const rect = svg("rect", {x, y, width: bw, height: Math.max(h, 1), fill: COLORS[series.indexOf(d.provider + " " + d.currency) % COLORS.length],
          "data-provider": d.provider});
        rect.append(svg("title", {}, `${d.provider}, ${d.day}: ${d.cost.toFixed(2)} ${d.currency}`));
        chart.append(rect);
      }
      chart.append(svg("text", {x, y: H - 8}, day.slice(5)));
    });
    series.forEach((s, i) => {
      chart.append(svg("rect", {x: W - 150, y: 4 + i * 14, width: 10, height: 10, fill: COLORS[i % COLORS.length]}));
      chart.append(svg("text", {x: W - 136, y: 13 + i * 14}, s));
    });
  }
  const totals = data.totals.map(t => `${t.provider}: ${money(t.cost, t.currency)}`);
  const unpriced = Object.entries(data.unpriced).map(([p, n]) => `${p}: ${n} without a price`);
  document.getElementById("cost-totals").textContent = [...totals, ...unpriced].join(" · ");
}

// ---- one job --------------------------------------------------------------------------------
function showState(j) {
  const badge = document.getElementById("job-state");
  badge.className = "state s-" + j.state;
  badge.dataset.state = j.state;
  badge.textContent = j.state;
  document.getElementById("job-message").textContent = j.message || "";
  document.getElementById("job-cancel").disabled = ["SUCCEEDED", "FAILED", "CANCELLED"].includes(j.state);
}

async function openJob(handle) {
  openHandle = handle;
  const data = await getJSON("/api/job/" + encodeURIComponent(handle));
  const panel = document.getElementById("job");
  panel.hidden = false;
  panel.dataset.handle = handle;
  document.getElementById("job-title").textContent = handle;
  document.getElementById("job-outputs-result").textContent = "";
  showState(data.job);
  drawTimeline(data);
  document.getElementById("job-request").textContent =
    data.request ? JSON.stringify(data.request, null, 2) : "(not kept: submitted before the dashboard kept requests, or elsewhere)";
  streamLogs(handle);
}

function drawTimeline(data) {
  const chart = document.getElementById("job-timeline");
  chart.replaceChildren();
  const W = +chart.getAttribute("width"), events = data.timeline;
  const start = events[0].at, end = Math.max(data.job.ended_at || data.now, start + 1);
  const x = t => 10 + (W - 20) * (t - start) / (end - start);
  const mid = 40;
  if (data.job.started_at) {
    chart.append(svg("rect", {x: x(data.job.started_at), y: mid - 8, width: Math.max(2, x(data.job.ended_at || data.now) - x(data.job.started_at)),
      height: 16, fill: "#cfe3fb", class: "run"}));
  }
  chart.append(svg("line", {x1: 10, y1: mid, x2: W - 10, y2: mid, stroke: "#999"}));
  events.forEach((e, i) => {
    const cx = x(e.at);
    const dot = svg("circle", {cx, cy: mid, r: 5, fill: e.what.startsWith("restart") ? "#d9480f" : "#0b63ce", class: "event",
      "data-what": e.what});
    dot.append(svg("title", {}, `${e.what} ${when(e.at)}${e.detail ? ": " + e.detail : ""}`));
    chart.append(dot);
    chart.append(svg("text", {x: Math.min(cx, W - 80), y: i % 2 ? mid + 26 : mid - 14}, e.what));
  });
}

function streamLogs(handle) {
  if (logSource) logSource.close();
  const pre = document.getElementById("job-logs");
  pre.textContent = "";
  logSource = new EventSource("/api/job/logs/" + encodeURIComponent(handle));
  logSource.onmessage = ev => {
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.append(JSON.parse(ev.data) + "\n");
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  };
  logSource.addEventListener("error", ev => { if (ev.data) pre.append("[cloudtrain ui] " + JSON.parse(ev.data) + "\n"); });
  logSource.addEventListener("end", () => { logSource.close(); pre.dataset.ended = "1"; });
}

async function cancelJob() {
  const handle = openHandle;
  if (!handle || !window.confirm(`Cancel ${handle}? Its nodes are stopped.`)) return;
  try {
    const status = await getJSON("/api/job/cancel/" + encodeURIComponent(handle),
      {method: "POST", headers: {"X-CSRF-Token": CSRF}});
    showState(status);
    loadJobs();
  } catch (e) {
    document.getElementById("job-message").textContent = "cancel failed: " + e.message;
  }
}

async function fetchOutputs() {
  const out = document.getElementById("job-outputs-result");
  out.textContent = "downloading…";
  try {
    const data = await getJSON("/api/job/outputs/" + encodeURIComponent(openHandle),
      {method: "POST", headers: {"X-CSRF-Token": CSRF}});
    out.textContent = data.files.length ? `${data.files.length} files: ${data.files.join(", ")}` : "no output files";
  } catch (e) {
    out.textContent = "outputs: " + e.message;
  }
}

// ---- resources -----------------------------------------------------------------------------
async function loadResources(ev) {
  if (ev) ev.preventDefault();
  const q = new URLSearchParams();
  for (const [id, key] of [["r-accelerator", "accelerator"], ["r-gpus", "gpus"], ["r-provider", "provider"]]) {
    const v = document.getElementById(id).value.trim();
    if (v) q.set(key, v);
  }
  const error = document.getElementById("res-error");
  error.textContent = "";
  try {
    const data = await latest("resources", "/api/resources?" + q.toString());
    if (!data) return;
    const rate = r => r.rate ?? r.price;  // the region's rate where the catalog has one
    const rows = data.rows.slice().sort((a, b) => (rate(a) ?? Infinity) - (rate(b) ?? Infinity));
    document.querySelector("#resources tbody").replaceChildren(...rows.map(r => el("tr", {},
      el("td", {}, r.provider), el("td", {}, r.instance_type),
      el("td", {}, `${r.count || ""} × ${r.accelerator || "-"}`), el("td", {class: "num"}, r.vcpus ?? "-"),
      el("td", {class: "num"}, r.memory_gb ?? "-"), el("td", {}, r.network || "-"),
      el("td", {class: "num"}, rate(r) == null ? "-" : money(rate(r), r.currency)),
      el("td", {class: "num"}, r.spot_rate == null ? "-" : money(r.spot_rate, r.currency)),
      el("td", {title: r.price_note || ""}, r.rate_region || (rate(r) == null ? (r.price_note ? "no price: see note" : "-") : "-")))));
  } catch (e) {
    error.textContent = e.message;
  }
}

// ---- wiring --------------------------------------------------------------------------------
function show(view) {
  for (const v of ["jobs", "resources"]) {
    document.getElementById("view-" + v).hidden = v !== view;
    document.getElementById("tab-" + v).classList.toggle("active", v === view);
  }
  if (view === "resources") loadResources();
}

document.addEventListener("DOMContentLoaded", () => {
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => show(tab.dataset.view));
  for (const id of ["f-provider", "f-state", "f-since"]) document.getElementById(id).addEventListener("change", () => { loadJobs(); loadCosts(); });
  document.getElementById("f-text").addEventListener("input", () => loadJobs());
  document.getElementById("job-filters").addEventListener("submit", ev => ev.preventDefault());
  document.getElementById("res-filters").addEventListener("submit", loadResources);
  document.getElementById("job-cancel").addEventListener("click", cancelJob);
  document.getElementById("job-outputs").addEventListener("click", fetchOutputs);
  document.getElementById("job-close").addEventListener("click", () => {
    document.getElementById("job").hidden = true; openHandle = null; if (logSource) logSource.close();
  });
  loadJobs();
  loadCosts();
  let refreshing = false;  // a slow answer is waited for, not overtaken by the next tick's question
  setInterval(() => {
    if (refreshing) return;
    refreshing = true;
    loadJobs().catch(() => {}).finally(() => { refreshing = false; });
  }, REFRESH_MS);
  setInterval(() => { loadCosts().catch(() => {}); }, REFRESH_MS * 5);
});
