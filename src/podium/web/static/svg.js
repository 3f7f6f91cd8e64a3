// Two plain-SVG charts, enough for these pages: a line chart of recent values and a bar
// chart of a histogram. No chart library: they draw a few dozen elements once a second.

const NS = "http://www.w3.org/2000/svg";

function s(tag, attrs = {}, text) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// A round upper bound for an axis: 1, 2, 5 times a power of ten.
export function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= v);
}

export function compact(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toFixed(1)}k`;
  if (a >= 100 || Number.isInteger(v)) return String(Math.round(v));
  return String(+v.toPrecision(2));
}

// series: [{name, points: [[t, v|null], ...]}]; a null value leaves a gap. ``left`` and
// ``right`` label the ends of the time axis (the console counts windows, not seconds).
export function lineChart(svg, series, { span = 120, width = 320, height = 120, left = `-${span}s`, right = "now" } = {}) {
  const pad = { l: 36, r: 8, t: 8, b: 18 };
  const w = width - pad.l - pad.r;
  const h = height - pad.t - pad.b;
  const now = Math.max(0, ...series.flatMap((x) => x.points.map((p) => p[0])));
  const values = series.flatMap((x) => x.points.map((p) => p[1])).filter((v) => v !== null);
  const top = niceMax(Math.max(0, ...values));
  const x = (t) => pad.l + w - ((now - t) / span) * w;
  const y = (v) => pad.t + h - (v / top) * h;
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  for (const v of [0, top / 2, top]) {
    svg.append(s("line", { class: "grid", x1: pad.l, x2: pad.l + w, y1: y(v), y2: y(v) }));
    svg.append(s("text", { class: "tick", x: pad.l - 4, y: y(v) + 3, "text-anchor": "end" }, compact(v)));
  }
  svg.append(s("text", { class: "tick", x: pad.l, y: height - 4 }, left));
  svg.append(s("text", { class: "tick", x: pad.l + w, y: height - 4, "text-anchor": "end" }, right));
  series.forEach((line, i) => {
    let run = [];
    const flush = () => {
      if (run.length > 1) svg.append(s("polyline", { class: `line s${i}`, points: run.join(" ") }));
      else if (run.length === 1) {
        const [px, py] = run[0].split(",");
        svg.append(s("circle", { class: `dot s${i}`, cx: px, cy: py, r: 1.8 }));
      }
      run = [];
    };
    for (const [t, v] of line.points) {
      if (v === null || now - t > span) flush();
      else run.push(`${x(t).toFixed(1)},${y(v).toFixed(1)}`);
    }
    flush();
  });
}

// buckets: [{low, high, count}]; marker: points to mark with a labelled line, or null.
export function barChart(svg, buckets, marker, { width = 360, height = 150, label = "" } = {}) {
  const pad = { l: 36, r: 10, t: 18, b: 20 };
  const w = width - pad.l - pad.r;
  const h = height - pad.t - pad.b;
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  if (!buckets.length) {
    svg.append(s("text", { class: "tick", x: width / 2, y: height / 2, "text-anchor": "middle" }, "no players yet"));
    return;
  }
  const lo = buckets[0].low;
  const hi = buckets[buckets.length - 1].high + 1;
  const top = niceMax(Math.max(...buckets.map((b) => b.count)));
  const x = (p) => pad.l + ((p - lo) / (hi - lo)) * w;
  const y = (c) => pad.t + h - (c / top) * h;
  for (const v of [0, top]) {
    svg.append(s("line", { class: "grid", x1: pad.l, x2: pad.l + w, y1: y(v), y2: y(v) }));
    svg.append(s("text", { class: "tick", x: pad.l - 4, y: y(v) + 3, "text-anchor": "end" }, compact(v)));
  }
  for (const b of buckets) {
    const bar = s("rect", {
      class: "bar",
      x: x(b.low) + 0.5,
      y: y(b.count),
      width: Math.max(1, x(b.high + 1) - x(b.low) - 1),
      height: Math.max(0, pad.t + h - y(b.count)),
    });
    bar.append(s("title", {}, `${b.low}–${b.high} points: ${b.count} players`));
    svg.append(bar);
  }
  svg.append(s("text", { class: "tick", x: pad.l, y: height - 4 }, compact(lo)));
  svg.append(s("text", { class: "tick", x: pad.l + w, y: height - 4, "text-anchor": "end" }, compact(hi - 1)));
  if (marker !== null && marker !== undefined) {
    const mx = x(Math.min(Math.max(marker, lo), hi));
    svg.append(s("line", { class: "marker", x1: mx, x2: mx, y1: pad.t - 4, y2: pad.t + h }));
    const anchor = mx > pad.l + w * 0.7 ? "end" : "start";
    const tx = anchor === "end" ? mx - 4 : mx + 4;
    svg.append(s("text", { class: "marker-label", x: tx, y: pad.t + 2, "text-anchor": anchor }, label));
  }
}
