// The ops page: polls GET /v1/admin/ops once a second and charts, for every metric family
// the process exports, what changed since the last poll: counters as rates, histograms as
// p50/p99 (interpolated within buckets, like Prometheus's histogram_quantile), gauges as
// they are, and *_timestamp gauges as seconds since. A new metric gets a chart unasked.

import { el } from "./dom.js";
import { compact, lineChart } from "./svg.js";

// The page takes an ops key: read-only, it reads these figures and /metrics, nothing else.
// It is kept in this tab's sessionStorage so that a reload (a wall display) stays live; a
// stolen ops key reads figures and changes nothing. An admin key is refused here.
const KEY = "podium.opsKey";
sessionStorage.removeItem("podium.adminKey"); // what older versions of this page kept
const POLL_MS = 1000;
const SPAN_S = 120;
// Shown first, in this order, with these titles; every other family follows by its help.
const HEADLINE = {
  podium_results_accepted: "Accepted results",
  podium_commit_to_board_seconds: "Commit to board",
  podium_read_seconds: "Read latency",
  podium_outbox_age_seconds: "Outbox age",
  podium_board_behind_seconds: "Board behind",
  podium_worker_heartbeat_timestamp: "Updater lag",
};

const $ = (id) => document.getElementById(id);
const charts = new Map();
let previous = null;
let timer = null;

// The state is a live region: it changes only with the state, the time sits outside it.
function setStatus(kind, text, time = "") {
  $("status").dataset.state = kind;
  if ($("status-text").textContent !== text) $("status-text").textContent = text;
  $("status-time").textContent = time;
}

// The q-quantile of cumulative bucket counts [[le (null = +Inf), count], ...].
export function quantile(q, buckets) {
  const total = buckets.length ? buckets[buckets.length - 1][1] : 0;
  if (!(total > 0)) return null;
  const rank = q * total;
  let lowLe = 0;
  let lowCount = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === null) return lowLe; // past the last bound: say the last bound
      if (count === lowCount) return le;
      return lowLe + ((le - lowLe) * (rank - lowCount)) / (count - lowCount);
    }
    lowLe = le ?? lowLe;
    lowCount = count;
  }
  return lowLe;
}

const labelName = (labels, fallback) => Object.values(labels).join(" ") || fallback;
// A family's title: the headline's, or its help text; the line below names the metric.
const title = (f) => HEADLINE[f.name] || f.help;
const sub = (f, prefix = "") => (HEADLINE[f.name] ? `${prefix}${f.help} · ${f.name}` : `${prefix}${f.name}`);

function chart(id, title, subtitle, unit) {
  let c = charts.get(id);
  if (!c) {
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", `${title}, last ${SPAN_S} seconds`);
    const legend = el("ul", { class: "legend" });
    const article = el(
      "article",
      { class: "card chart", "data-metric": id },
      el("h2", { text: title }),
      el("p", { class: "help", text: subtitle }),
      svg,
      legend,
    );
    c = { article, svg, legend, unit, series: new Map() };
    charts.set(id, c);
  }
  return c;
}

function record(c, name, t, v) {
  const points = c.series.get(name) || [];
  points.push([t, v]);
  while (points.length && t - points[0][0] > SPAN_S) points.shift();
  c.series.set(name, points);
}

function draw() {
  const order = [...new Set([...Object.keys(HEADLINE).filter((id) => charts.has(id)), ...charts.keys()])];
  const box = $("charts");
  if ([...box.children].map((a) => a.dataset.metric).join() !== order.join()) {
    box.replaceChildren(...order.map((id) => charts.get(id).article));
  }
  for (const id of order) {
    const c = charts.get(id);
    const series = [...c.series].map(([name, points]) => ({ name, points }));
    // The x axis grows with the history held, from 20 s up to SPAN_S.
    const times = series.flatMap((x) => x.points.map((p) => p[0]));
    const held = times.length ? Math.max(...times) - Math.min(...times) : 0;
    lineChart(c.svg, series, { span: Math.min(SPAN_S, Math.max(20, Math.ceil(held))) });
    c.legend.replaceChildren(
      ...series.map((x, i) => {
        const last = x.points.length ? x.points[x.points.length - 1][1] : null;
        const value = last === null ? "–" : `${compact(last)}${c.unit}`;
        return el("li", { class: `s${i}` }, el("span", { class: "swatch", "aria-hidden": "true" }), `${x.name} `, el("strong", { text: value }));
      }),
    );
  }
}

function ingest(snap) {
  const t = snap.now;
  const dt = previous ? t - previous.now : null;
  const before = (group, name) => previous?.[group].find((f) => f.name === name);
  for (const f of snap.counters) {
    const c = chart(f.name, `${title(f)} /s`, sub(f), "/s");
    const old = before("counters", f.name);
    for (const s of f.series) {
      const key = JSON.stringify(s.labels);
      const was = old?.series.find((o) => JSON.stringify(o.labels) === key);
      // A counter that went down was reset (a restart): count from zero.
      const rate = was && dt > 0 ? (s.value >= was.value ? s.value - was.value : s.value) / dt : null;
      record(c, labelName(s.labels, "rate"), t, rate);
    }
  }
  for (const f of snap.histograms) {
    const c = chart(f.name, title(f), sub(f), " ms");
    const old = before("histograms", f.name);
    // Every label set together: bucket bounds are the same within a family.
    const sum = (fam) => {
      const out = fam.series[0]?.buckets.map(([le]) => [le, 0]) || [];
      for (const s of fam.series) s.buckets.forEach(([, n], i) => (out[i][1] += n));
      return out;
    };
    const now = sum(f);
    const was = old ? sum(old) : null;
    const delta = was && was.length === now.length ? now.map(([le, n], i) => [le, Math.max(0, n - was[i][1])]) : [];
    for (const q of [0.5, 0.99]) {
      const v = quantile(q, delta);
      record(c, `p${q * 100}`, t, v === null ? null : v * 1000);
    }
  }
  for (const f of snap.gauges) {
    const age = f.name.endsWith("_timestamp");
    const unit = age || f.name.endsWith("_seconds") ? " s" : "";
    const c = chart(f.name, title(f), sub(f, age ? "seconds since: " : ""), unit);
    for (const s of f.series) record(c, labelName(s.labels, "value"), t, age ? Math.max(0, t - s.value) : s.value);
  }
  previous = snap;
  draw();
}

async function poll() {
  const key = sessionStorage.getItem(KEY);
  if (!key) return;
  try {
    const r = await fetch("/v1/admin/ops", { headers: { Authorization: `Bearer ${key}` } });
    if (r.status === 401 || r.status === 403) {
      const detail = (await r.json().catch(() => ({}))).detail || r.statusText;
      sessionStorage.removeItem(KEY);
      setStatus("down", `the key was refused: ${detail}`);
      return;
    }
    if (!r.ok) throw new Error(`${r.status} ${r.statusText}`);
    ingest(await r.json());
    setStatus("live", `live · ${charts.size} charts`, new Date().toLocaleTimeString("en-GB"));
  } catch (e) {
    setStatus("down", `cannot read the figures: ${e.message}`);
  }
  timer = setTimeout(poll, POLL_MS);
}

function start() {
  clearTimeout(timer);
  previous = null;
  setStatus("connecting", "connecting…");
  poll();
}

$("login").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(KEY, $("key").value.trim());
  $("key").value = "";
  start();
});
$("forget").addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  clearTimeout(timer);
  setStatus("idle", "key forgotten; enter an ops key");
});

window.podiumOps = { quantile };
if (sessionStorage.getItem(KEY)) start();
