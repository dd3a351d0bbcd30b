// Line charts as inline SVG, drawn by the console itself (no chart library: docs/console.md).
// Series differ by colour AND dash pattern, and the legend names each with its latest
// value in words, so the chart reads without colour.

const NS = "http://www.w3.org/2000/svg";
const DASHES = ["", "6 4", "2 3", "10 3 2 3"];
const COLOURS = ["#0b57d0", "#8a5300", "#146c2e", "#b3261e"];

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// lineChart({title, series: [{label, points: [[tMs, value], ...]}], fromMs, toMs, format})
// -> <figure> with an SVG (role=img, described by its legend) and a text legend.
export function lineChart({ title, series, fromMs, toMs, format = (v) => String(v) }) {
  const W = 600, H = 180, L = 48, R = 8, T = 8, B = 22;
  const max = Math.max(1, ...series.flatMap((s) => s.points.map((p) => p[1])));
  const x = (t) => L + ((t - fromMs) / Math.max(1, toMs - fromMs)) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const id = `chart-${Math.random().toString(36).slice(2)}`;
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": `${id}-title`,
    "aria-describedby": `${id}-legend`, preserveAspectRatio: "none", class: "chart" },
  svg("title", { id: `${id}-title` }, title));
  for (const frac of [0, 0.5, 1]) {
    const v = max * frac;
    chart.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#d0d7de", "stroke-width": 1 }),
      svg("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#59636e" }, format(v)));
  }
  const minutes = Math.round((toMs - fromMs) / 60000);
  chart.append(svg("text", { x: L, y: H - 6, "font-size": 11, fill: "#59636e" }, `${minutes} min ago`),
    svg("text", { x: W - R, y: H - 6, "text-anchor": "end", "font-size": 11, fill: "#59636e" }, "now"));
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const d = s.points.map((p, j) => `${j ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
    chart.append(svg("path", { d, fill: "none", stroke: COLOURS[i % COLOURS.length], "stroke-width": 2,
      "stroke-dasharray": DASHES[i % DASHES.length] || null, "vector-effect": "non-scaling-stroke" }));
  });
  const legend = document.createElement("ul");
  legend.className = "legend";
  legend.id = `${id}-legend`;
  series.forEach((s, i) => {
    const last = s.points.length ? s.points[s.points.length - 1][1] : null;
    const key = svg("svg", { width: 28, height: 10, "aria-hidden": "true" },
      svg("line", { x1: 0, x2: 28, y1: 5, y2: 5, stroke: COLOURS[i % COLOURS.length], "stroke-width": 2,
        "stroke-dasharray": DASHES[i % DASHES.length] || null }));
    const item = document.createElement("li");
    item.append(key, ` ${s.label}${DASHES[i % DASHES.length] ? " (dashed)" : " (solid)"}: ${last === null ? "no data" : format(last)}`);
    legend.append(item);
  });
  const figure = document.createElement("figure");
  figure.className = "chart-box";
  const caption = document.createElement("figcaption");
  caption.textContent = title;
  figure.append(caption, chart, legend);
  return figure;
}
