// cloudtrain ui: the jobs of every provider, one page. Plain JavaScript, no build step, nothing
// loaded from elsewhere. Every text from the server goes in through textContent (never HTML).
"use strict";

const CSRF = document.querySelector('meta[name="csrf"]').content;
const COLORS = ["#0b63ce", "#d9480f", "#2b8a3e", "#862e9c", "#c92a2a", "#5c940d", "#1098ad", "#e67700"];
const REFRESH_MS = 2000;
const DETAIL_MS = 5000;  // the open job's attempts and metrics are asked again this often
let openHandle = null;
let logSource = null;
const compared = new Set();  // the handles ticked "Compare": plotted beside the open job
const asked = {jobs: 0, costs: 0, resources: 0, detail: 0, metrics: 0};  // an answer to an older question is dropped

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

// Times as `cloudtrain list` prints them (2026-11-28 15:04, 24-hour, local time), whatever the
// browser's locale would say.
const pad = n => String(n).padStart(2, "0");

function when(t) {
  if (!t) return "-";
  const d = new Date(t * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function clock(t) {
  const d = new Date(t * 1000);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function whenExactly(t) {
  return t ? when(t) + ":" + pad(new Date(t * 1000).getSeconds()) : "-";
}

function span(seconds) {  // as `list`'s DURATION: 45s, 12m05s, 3h02m, 2d04h
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + pad(s % 60) + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h" + pad(Math.floor(s % 3600 / 60)) + "m";
  return Math.floor(s / 86400) + "d" + pad(Math.floor(s % 86400 / 3600)) + "h";
}

function num(v) {
  if (v == null) return "-";
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e6 || a < 1e-3) ? v.toExponential(2) : String(+v.toPrecision(4));
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
  const box = el("input", {type: "checkbox", class: "compare", "aria-label": "compare " + j.handle});
  box.checked = compared.has(j.handle);
  box.addEventListener("click", ev => {
    ev.stopPropagation();  // ticking is not opening
    if (box.checked) compared.add(j.handle); else compared.delete(j.handle);
    if (!openHandle && box.checked) openJob(j.handle); else loadMetrics();
  });
  tr.append(el("td", {class: "compare-cell"}, box));
  jobCells(j).forEach((text, i) => tr.append(el("td", {class: [4, 6, 7, 8].includes(i) ? "num" : (i === 2 ? "state-cell" : (i === 0 ? "name" : ""))})));
  tr.addEventListener("click", () => openJob(j.handle));
  return tr;
}

// A row is updated where it stands, and only the cells whose text changed: the table refreshes
// every 2 s, and a user reading or selecting a row must not have it replaced under them.
// A long message is cut to the column (the whole text on hover, and in the job's detail), so the
// cost columns stay on the screen.
function fillJobRow(tr, j) {
  const cells = [...tr.children].slice(1);  // (the first is the Compare box)
  jobCells(j).forEach((text, i) => {
    if (i === 2) {
      const key = j.state + "\u0000" + (j.message || "");
      if (cells[2].dataset.key !== key) {
        cells[2].dataset.key = key;
        cells[2].replaceChildren(stateBadge(j.state), j.message ? el("span", {class: "reason", title: j.message}, j.message) : "");
      }
    } else if (cells[i].textContent !== text) {
      cells[i].textContent = text;
      if (i === 0) cells[i].title = text;
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
  document.getElementById("updated").textContent = "updated " + clock(data.now);
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
  // why a cost is missing and how to get it, as `cloudtrain list` says under its table
  const why = document.getElementById("cost-why");
  why.replaceChildren(...Object.values(data.unpriced_why || {}).map(text => el("li", {}, text)));
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
  const ticket = ++asked.detail;
  const data = await getJSON("/api/job/" + encodeURIComponent(handle));
  if (ticket !== asked.detail) return;
  const panel = document.getElementById("job");
  panel.hidden = false;
  panel.dataset.handle = handle;
  document.getElementById("job-title").textContent = handle;
  document.getElementById("job-outputs-result").textContent = "";
  document.getElementById("job-metrics").replaceChildren();
  showDetail(data);
  document.getElementById("job-request").textContent =
    data.request ? JSON.stringify(data.request, null, 2) : "(not kept: submitted before the dashboard kept requests, or elsewhere)";
  // below a long table the detail would open out of sight: bring it into view
  panel.scrollIntoView({block: "start"});
  streamLogs(handle);
  loadMetrics();
}

function showDetail(data) {
  showState(data.job);
  drawTimeline(data);
  showAttempts(data);
}

async function refreshDetail() {
  const handle = openHandle;
  if (!handle) return;
  const ticket = ++asked.detail;
  const data = await getJSON("/api/job/" + encodeURIComponent(handle));
  if (ticket === asked.detail && handle === openHandle) showDetail(data);
}

// ---- attempts and the controller's next step (issue 41) --------------------------------------
function showAttempts(data) {
  const box = document.getElementById("job-plan");
  box.hidden = !data.plan;
  if (!data.plan) return;
  const p = data.plan, r = p.restarts;
  const used = `${r.preemptions} preemption(s), ${r.failures} failure(s) of ${r.max_restarts} restarts`;
  const spent = p.budget != null ? `${money(p.spent, p.currency)} of ${money(p.budget, p.currency)}` : money(p.spent, p.currency);
  const next = p.next ? "next: " + p.next : (p.reason ? "done: " + p.reason : "");
  const controller = p.controller_running || ["SUCCEEDED", "FAILED", "CANCELLED"].includes(p.state) ? ""
    : " (no controller runs now: the next cloudtrain command starts it)";
  // (the controller's own words for the next step say the restarts used already)
  document.getElementById("job-next").textContent = [p.state, p.step, p.next ? "" : used, spent, next]
    .filter(Boolean).join(" · ") + controller;
  document.querySelector("#job-attempts tbody").replaceChildren(...data.attempts.map(a => el("tr", {"data-attempt": a.attempt},
    el("td", {class: "num"}, a.attempt), el("td", {}, a.provider), el("td", {}, a.handle || "-"),
    el("td", {}, when(a.started_at)), el("td", {}, when(a.ended_at)),
    el("td", {class: "reason-cell", title: a.reason || ""}, a.reason || ""),
    el("td", {class: "num"}, money(a.cost, p.currency)))));
}

// ---- metrics over steps and time (issue 43) --------------------------------------------------
async function loadMetrics() {
  if (!openHandle) return;
  const handles = [openHandle, ...[...compared].filter(h => h !== openHandle)];
  const ticket = ++asked.metrics;
  const found = await Promise.all(handles.map(h => getJSON("/api/job/metrics/" + encodeURIComponent(h))
    .catch(e => ({handle: h, name: h, error: e.message, metrics: {}, attempts: [], cost: {curve: []}}))));
  if (ticket !== asked.metrics) return;
  drawMetrics(found);
  drawCost(found[0]);
}

function drawMetrics(jobs) {
  const overTime = document.getElementById("m-x").value === "time";
  const legend = document.getElementById("m-legend");
  legend.replaceChildren(...jobs.map((j, i) => el("span", {class: "legend-item", "data-handle": j.handle},
    el("i", {}), `${j.name || j.handle}${j.error ? " (" + j.error + ")" : ` (${j.reports || 0} reports)`}`)));
  [...legend.querySelectorAll("i")].forEach((node, i) => { node.style.background = COLORS[i % COLORS.length]; });
  const names = [...new Set(jobs.flatMap(j => Object.keys(j.metrics)))].sort();
  const box = document.getElementById("job-metrics");
  if (!names.length) {
    box.replaceChildren(el("p", {class: "muted"}, "no metrics reported yet (report(step=..., loss=...) from the " +
      "job, Hugging Face Trainer's log lines, or 'epoch N/M loss X' lines)"));
    return;
  }
  const kept = new Map([...box.querySelectorAll("figure")].map(f => [f.dataset.metric, f]));
  box.replaceChildren(...names.map(name => {
    const figure = kept.get(name) || el("figure", {"data-metric": name}, el("figcaption", {}, name),
      svg("svg", {class: "metric-chart", width: 440, height: 190, role: "img", "aria-label": name, "data-metric": name}));
    drawMetric(figure.querySelector("svg"), name, jobs, overTime);
    return figure;
  }));
}

function drawMetric(chart, name, jobs, overTime) {
  chart.replaceChildren();
  const W = +chart.getAttribute("width"), H = +chart.getAttribute("height"), L = 48, R = 10, T = 8, B = 22;
  // x: the step (or epoch) the point was reported at, or the seconds since the job's first report
  const lines = jobs.map((j, i) => {
    const points = (j.metrics[name] || []).filter(p => p[2] != null && (!overTime || p[1] != null));
    const t0 = overTime ? (j.started_at || Math.min(...points.map(p => p[1]))) : 0;
    return {job: j, color: COLORS[i % COLORS.length], points: points.map(p => [overTime ? p[1] - t0 : p[0], p[2], p[3]])};
  });
  const all = lines.flatMap(l => l.points);
  if (!all.length) {
    chart.append(svg("text", {x: 10, y: H / 2}, overTime ? "no timed reports (only report() lines carry a time)" : "no points"));
    return;
  }
  let [x0, x1] = [Math.min(...all.map(p => p[0])), Math.max(...all.map(p => p[0]))];
  let [y0, y1] = [Math.min(...all.map(p => p[1])), Math.max(...all.map(p => p[1]))];
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= Math.abs(y0) * 0.1 || 1; y1 += Math.abs(y1) * 0.1 || 1; }
  const sx = x => L + (W - L - R) * (x - x0) / (x1 - x0), sy = y => T + (H - T - B) * (1 - (y - y0) / (y1 - y0));
  chart.append(svg("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999"}),
    svg("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#999"}),
    svg("text", {x: 2, y: T + 8}, num(y1)), svg("text", {x: 2, y: H - B}, num(y0)),
    svg("text", {x: L, y: H - 6}, overTime ? span(x0) : num(x0)),
    svg("text", {x: W - R - 60, y: H - 6}, (overTime ? span(x1) : num(x1)) + " " + (overTime ? "" : (jobs[0].x || "step"))));
  for (const line of lines) {
    const byAttempt = new Map();
    for (const p of line.points) {
      if (!byAttempt.has(p[2])) byAttempt.set(p[2], []);
      byAttempt.get(p[2]).push(p);
    }
    for (const [attempt, points] of byAttempt) {
      const info = (line.job.attempts || [])[attempt] || {label: "attempt " + attempt};
      const poly = svg("polyline", {class: "series", fill: "none", stroke: line.color, "stroke-width": 1.5,
        "stroke-dasharray": attempt % 2 ? "5 2" : "none", points: points.map(p => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" "),
        "data-handle": line.job.handle, "data-attempt": attempt, "data-points": points.length});
      poly.append(svg("title", {}, `${line.job.name || line.job.handle}: ${name}, ${info.label} (${points.length} points)`));
      chart.append(poly);
      if (attempt > 0) {  // where an attempt began: a mark with its reason
        const x = sx(points[0][0]);
        const mark = svg("line", {class: "attempt-mark", x1: x, y1: T, x2: x, y2: H - B, stroke: line.color,
          "stroke-dasharray": "2 3", "data-attempt": attempt, "data-handle": line.job.handle});
        mark.append(svg("title", {}, info.label + (info.reason ? ": " + info.reason : "") + (info.at ? " at " + whenExactly(info.at) : "")));
        const label = info.label.replace(/^attempt /, "#");
        chart.append(mark, svg("text", {x: x > W - R - 70 ? x - 4 : x + 2, y: T + 18,
          "text-anchor": x > W - R - 70 ? "end" : "start"}, label));
      }
    }
  }
}

function drawCost(j) {
  const chart = document.getElementById("job-cost");
  chart.replaceChildren();
  const c = j.cost || {curve: []};
  const text = document.getElementById("job-cost-text");
  chart.style.display = c.so_far == null ? "none" : "";
  if (c.so_far == null) {
    text.textContent = "no price known for this job's instance type here, so no cost";
    return;
  }
  text.textContent = `${money(c.so_far, c.currency)} so far` + (c.budget != null
    ? ` of a ${money(c.budget, c.currency)} budget (max_cost): ${(100 * c.so_far / c.budget).toFixed(1)} %` : " (no max_cost)");
  const W = +chart.getAttribute("width"), H = +chart.getAttribute("height"), L = 48, R = 10, T = 8, B = 18;
  const t0 = c.curve.length ? c.curve[0][0] : 0, t1 = Math.max(c.curve.length ? c.curve[c.curve.length - 1][0] : 1, t0 + 1);
  const top = Math.max(c.so_far, c.budget || 0) * 1.08 || 1;
  const sx = t => L + (W - L - R) * (t - t0) / (t1 - t0), sy = v => T + (H - T - B) * (1 - v / top);
  chart.append(svg("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999"}),
    svg("text", {x: 2, y: T + 8}, num(top)), svg("text", {x: 2, y: H - B}, "0"),
    svg("text", {x: L, y: H - 4}, whenExactly(t0)), svg("text", {x: W - R - 110, y: H - 4}, whenExactly(t1)));
  if (c.budget != null) {
    const budget = svg("line", {class: "budget", x1: L, y1: sy(c.budget), x2: W - R, y2: sy(c.budget), stroke: "#c92a2a",
      "stroke-dasharray": "6 3"});
    budget.append(svg("title", {}, "max_cost " + money(c.budget, c.currency)));
    chart.append(budget, svg("text", {x: W - R - 120, y: sy(c.budget) - 3}, "budget " + money(c.budget, c.currency)));
  }
  const spent = svg("polyline", {class: "spent", fill: "none", stroke: COLORS[0], "stroke-width": 2,
    points: c.curve.map(p => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" ")});
  spent.append(svg("title", {}, `${money(c.so_far, c.currency)} so far`));
  chart.append(spent);
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
    dot.append(svg("title", {}, `${e.what} ${whenExactly(e.at)}${e.detail ? ": " + e.detail : ""}`));
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
  document.getElementById("m-x").addEventListener("change", () => loadMetrics());
  loadJobs();
  loadCosts();
  let refreshing = false;  // a slow answer is waited for, not overtaken by the next tick's question
  setInterval(() => {
    if (refreshing) return;
    refreshing = true;
    loadJobs().catch(() => {}).finally(() => { refreshing = false; });
  }, REFRESH_MS);
  setInterval(() => { loadCosts().catch(() => {}); }, REFRESH_MS * 5);
  let following = false;  // the open job: its attempts, next step and metrics, live
  setInterval(() => {
    if (following || !openHandle) return;
    following = true;
    Promise.all([refreshDetail(), loadMetrics()]).catch(() => {}).finally(() => { following = false; });
  }, DETAIL_MS);
});
