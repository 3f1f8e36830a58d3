// Small SVG charts for flscale serve: line and point series with error bars, linear or log
// axes, hover read-out, and a categorical grid (the phase map). No dependencies.
(function () {
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];

function el(name, attrs, parent) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function fmt(v) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(3);
  return Number(v.toPrecision(5)).toString();
}

// Axis ticks: decades on a log axis, ~6 round numbers on a linear one.
function ticks(lo, hi, log) {
  if (log) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      for (const m of [1, 2, 5]) {
        const v = m * Math.pow(10, e);
        if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
      }
    }
    // Less than a decade: round numbers on the linear scale read better.
    if (out.length >= 3) return out;
    return ticks(lo, hi, false).filter(v => v > 0);
  }
  const span = hi - lo || 1;
  const step0 = Math.pow(10, Math.floor(Math.log10(span / 6)));
  const step = [1, 2, 5, 10].map(m => m * step0).find(s => span / s <= 7);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9 * span; v += step) out.push(Math.abs(v) < 1e-12 * span ? 0 : v);
  return out;
}

function extent(values, log, pad) {
  let v = values.filter(x => isFinite(x) && (!log || x > 0));
  if (v.length === 0) return log ? [1, 10] : [0, 1];
  let lo = Math.min(...v), hi = Math.max(...v);
  if (log) {
    if (lo === hi) { lo /= 2; hi *= 2; }
    const f = Math.pow(hi / lo, pad);
    return [lo / f, hi * f];
  }
  if (lo === hi) { lo -= 0.5; hi += 0.5; }
  const d = (hi - lo) * pad;
  return [lo - d, hi + d];
}

// A point's error bar: its interval [lo, hi] when it has one (asymmetric, e.g. a bracket),
// else y ± err; null without either.
function bar(p) {
  if (p.lo !== undefined && p.lo !== null && p.hi !== undefined && p.hi !== null) return [p.lo, p.hi];
  return p.err ? [p.y - p.err, p.y + p.err] : null;
}

// Draws a chart into the <svg> `svg`. spec: {series: [{name, points: [{x, y, err, lo, hi, open}],
// line, dots, color}], xlog, ylog, xlabel, ylabel, title, xrange, yrange, vlines: [{x, label}],
// marker: {x, y, label}}. Hovering a point shows its values in `tooltip` (an element).
function drawChart(svg, spec, tooltip) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  addExport(svg);
  const W = svg.clientWidth || 600, H = svg.clientHeight || 360;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const m = { l: 64, r: 16, t: spec.title ? 28 : 12, b: 46 };
  const xs = [], ys = [];
  for (const s of spec.series) for (const p of s.points) {
    xs.push(p.x);
    ys.push(p.y);
    const b = bar(p);
    if (b) ys.push(...b);
  }
  if (spec.marker) { xs.push(spec.marker.x); ys.push(spec.marker.y); }
  const [x0, x1] = spec.xrange || extent(xs, spec.xlog, 0.04);
  const [y0, y1] = spec.yrange || extent(ys, spec.ylog, 0.06);
  const tx = v => spec.xlog ? Math.log10(v) : v, ty = v => spec.ylog ? Math.log10(v) : v;
  const sx = v => m.l + (tx(v) - tx(x0)) / (tx(x1) - tx(x0)) * (W - m.l - m.r);
  const sy = v => H - m.b - (ty(v) - ty(y0)) / (ty(y1) - ty(y0)) * (H - m.t - m.b);
  const ok = (x, y) => isFinite(x) && isFinite(y) && (!spec.xlog || x > 0) && (!spec.ylog || y > 0);
  const clip = "clip" + Math.random().toString(36).slice(2);
  const defs = el("defs", {}, svg);
  el("rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b }, el("clipPath", { id: clip }, defs));
  const axes = el("g", { class: "axes" }, svg);
  for (const v of ticks(x0, x1, spec.xlog)) {
    el("line", { x1: sx(v), x2: sx(v), y1: m.t, y2: H - m.b, class: "grid" }, axes);
    el("text", { x: sx(v), y: H - m.b + 16, "text-anchor": "middle" }, axes).textContent = fmt(v);
  }
  for (const v of ticks(y0, y1, spec.ylog)) {
    el("line", { x1: m.l, x2: W - m.r, y1: sy(v), y2: sy(v), class: "grid" }, axes);
    el("text", { x: m.l - 6, y: sy(v) + 4, "text-anchor": "end" }, axes).textContent = fmt(v);
  }
  el("rect", { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, class: "frame" }, axes);
  el("text", { x: (m.l + W - m.r) / 2, y: H - 8, "text-anchor": "middle", class: "label" }, axes).textContent =
    spec.xlabel + (spec.xlog ? " (log)" : "");
  el("text", { x: 14, y: (m.t + H - m.b) / 2, "text-anchor": "middle", class: "label",
    transform: `rotate(-90 14 ${(m.t + H - m.b) / 2})` }, axes).textContent = spec.ylabel + (spec.ylog ? " (log)" : "");
  if (spec.title) el("text", { x: m.l, y: 18, class: "title" }, axes).textContent = spec.title;
  const plot = el("g", { "clip-path": `url(#${clip})` }, svg);
  for (const v of spec.vlines || []) {
    if (!ok(v.x, y0 > 0 ? y0 : 1) && spec.xlog) continue;
    el("line", { x1: sx(v.x), x2: sx(v.x), y1: m.t, y2: H - m.b, class: "vline" }, plot);
    el("text", { x: sx(v.x) + 3, y: m.t + 12, class: "vlabel" }, plot).textContent = v.label;
  }
  spec.series.forEach((s, i) => {
    const color = s.color || COLORS[i % COLORS.length];
    const pts = s.points.filter(p => ok(p.x, p.y));
    if (s.line !== false && pts.length > 1) {
      const d = pts.map((p, j) => `${j ? "L" : "M"}${sx(p.x).toFixed(1)},${sy(p.y).toFixed(1)}`).join("");
      el("path", { d, stroke: color, fill: "none", "stroke-width": s.width || 2, "stroke-dasharray": s.dash || "" }, plot);
    }
    if (!s.dots) return;
    for (const p of pts) {
      const b = bar(p);
      if (b && ok(p.x, b[0]) && ok(p.x, b[1])) {
        el("line", { x1: sx(p.x), x2: sx(p.x), y1: sy(b[0]), y2: sy(b[1]), stroke: color, "stroke-width": 1.5 }, plot);
      }
      const c = el("circle", { cx: sx(p.x), cy: sy(p.y), r: 4.5, stroke: color, "stroke-width": 2,
        fill: p.open ? "white" : color, class: "point" + (p.open ? " open" : "") }, plot);
      const text = `${s.name}: ${spec.xlabel} = ${fmt(p.x)}, ${spec.ylabel} = ${fmt(p.y)}` +
        (p.lo !== undefined && p.lo !== null ? ` in [${fmt(p.lo)}, ${fmt(p.hi)}]` : p.err ? ` ± ${fmt(p.err)}` : "") +
        (p.note ? ` (${p.note})` : "");
      el("title", {}, c).textContent = text;
      if (tooltip) {
        c.addEventListener("mouseenter", () => { tooltip.textContent = text; tooltip.hidden = false; });
        c.addEventListener("mouseleave", () => { tooltip.hidden = true; });
      }
    }
  });
  if (spec.marker && ok(spec.marker.x, spec.marker.y)) {
    const g = el("g", { class: "marker" }, plot);
    el("circle", { cx: sx(spec.marker.x), cy: sy(spec.marker.y), r: 7 }, g);
    el("text", { x: sx(spec.marker.x) + 10, y: sy(spec.marker.y) - 8 }, g).textContent = spec.marker.label || "";
  }
  drawLegend(svg, spec, m, W, H, sx, sy, ok);
  svg._flchart = { kind: "chart", spec };
}

// The legend goes in the plot corner that covers the fewest drawn points (on a white box), so
// it does not hide the curves it names.
function drawLegend(svg, spec, m, W, H, sx, sy, ok) {
  const named = spec.series.map((s, i) => ({ s, i })).filter(({ s }) => s.name);
  if (!named.length) return;
  const bw = Math.min(W - m.l - m.r - 8, 26 + 6.4 * Math.max(...named.map(({ s }) => s.name.length)));
  const bh = 8 + 16 * named.length;
  const pts = [];
  for (const s of spec.series) for (const p of s.points) {
    if (!ok(p.x, p.y)) continue;
    pts.push([sx(p.x), sy(p.y)]);
    // An error bar counts as covered along its length (a point every 8 px).
    const b = s.dots ? bar(p) : null;
    if (b && ok(p.x, b[0]) && ok(p.x, b[1])) {
      const [y0, y1] = [sy(b[0]), sy(b[1])].sort((a, c) => a - c);
      for (let y = y0; y <= y1; y += 8) pts.push([sx(p.x), y]);
    }
  }
  if (spec.marker && ok(spec.marker.x, spec.marker.y)) pts.push([sx(spec.marker.x), sy(spec.marker.y)]);
  const corners = [
    [W - m.r - bw - 4, m.t + 4], [m.l + 4, m.t + 4],
    [W - m.r - bw - 4, H - m.b - bh - 4], [m.l + 4, H - m.b - bh - 4],
  ];
  const covered = ([x, y]) => pts.filter(([px, py]) => px >= x - 4 && px <= x + bw + 4 && py >= y - 4 && py <= y + bh + 4).length;
  const [x, y] = corners.reduce((best, c) => (covered(c) < covered(best) ? c : best));
  const legend = el("g", { class: "legend" }, svg);
  el("rect", { x, y, width: bw, height: bh, class: "legend-box" }, legend);
  named.forEach(({ s, i }, k) => {
    const ly = y + 16 + 16 * k;
    el("rect", { x: x + 6, y: ly - 9, width: 12, height: 10, fill: s.color || COLORS[i % COLORS.length] }, legend);
    el("text", { x: x + 22, y: ly }, legend).textContent = s.name;
  });
}

// A categorical grid: cells[iy][ix] is an index into `names` (or null). Axes are exponent
// values (strings like "3/2" are accepted).
function drawGrid(svg, grid, cells, names, xlabel, ylabel) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  addExport(svg);
  svg._flchart = { kind: "grid", grid, cells, names, xlabel, ylabel };
  const W = svg.clientWidth || 600, H = svg.clientHeight || 360;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const m = { l: 56, r: 200, t: 12, b: 46 };
  const n = grid.length, cw = (W - m.l - m.r) / n, ch = (H - m.t - m.b) / n;
  const g = el("g", {}, svg);
  cells.forEach((row, iy) => row.forEach((k, ix) => {
    const r = el("rect", { x: m.l + ix * cw, y: H - m.b - (iy + 1) * ch, width: cw + 0.5, height: ch + 0.5,
      fill: k === null ? "#eee" : COLORS[k % COLORS.length], "fill-opacity": 0.75 }, g);
    el("title", {}, r).textContent = `${xlabel} = d^${grid[ix]}, ${ylabel} = d^${grid[iy]}: ` +
      (k === null ? "no pattern aligns" : names[k].join(" = "));
  }));
  const axes = el("g", { class: "axes" }, svg);
  const every = Math.max(1, Math.round(n / 7));
  grid.forEach((v, i) => {
    if (i % every) return;
    el("text", { x: m.l + (i + 0.5) * cw, y: H - m.b + 16, "text-anchor": "middle" }, axes).textContent = v;
    el("text", { x: m.l - 6, y: H - m.b - (i + 0.5) * ch + 4, "text-anchor": "end" }, axes).textContent = v;
  });
  el("text", { x: m.l + (W - m.l - m.r) / 2, y: H - 8, "text-anchor": "middle", class: "label" }, axes).textContent = `log_d ${xlabel}`;
  el("text", { x: 14, y: (H - m.b + m.t) / 2, class: "label", "text-anchor": "middle",
    transform: `rotate(-90 14 ${(H - m.b + m.t) / 2})` }, axes).textContent = `log_d ${ylabel}`;
  names.forEach((w, k) => {
    const y = m.t + 14 + 18 * k;
    el("rect", { x: W - m.r + 12, y: y - 10, width: 12, height: 12, fill: COLORS[k % COLORS.length], "fill-opacity": 0.75 }, axes);
    el("text", { x: W - m.r + 30, y }, axes).textContent = w.join(" = ");
  });
}

// ---------------------------------------------------------------- export
// Every chart can be saved as CSV (its data), SVG (standalone, styles embedded) and PNG.

const CHART_CSS = `text { font: 11px system-ui, sans-serif; fill: #333; }
.label { font-size: 12px; } .title { font-size: 13px; font-weight: bold; }
.grid { stroke: #eee; } .frame { fill: none; stroke: #999; }
.vline { stroke: #888; stroke-dasharray: 4 3; } .vlabel { font-size: 10px; fill: #666; }
.marker circle { fill: #000; } .legend-box { fill: white; fill-opacity: 0.85; stroke: #ccc; }`;

function csvCell(v) {
  if (v === null || v === undefined || (typeof v === "number" && !isFinite(v))) return "";
  const t = String(v);
  return /[",\n]/.test(t) ? `"${t.replace(/"/g, '""')}"` : t;
}

// The chart's data as CSV: one row per point (series, x, y, error) or per grid cell.
function exportCSV(svg) {
  const c = svg._flchart;
  if (!c) return "";
  const rows = [];
  if (c.kind === "grid") {
    rows.push([`log_d ${c.xlabel}`, `log_d ${c.ylabel}`, "winners"]);
    c.cells.forEach((row, iy) => row.forEach((k, ix) => rows.push([c.grid[ix], c.grid[iy], k === null ? "" : c.names[k].join(" = ")])));
  } else {
    const s = c.spec;
    rows.push(["series", s.xlabel, s.ylabel, "error", "low", "high"]);
    for (const ser of s.series) for (const p of ser.points) rows.push([ser.name || "", p.x, p.y, p.err, p.lo, p.hi]);
  }
  return rows.map(r => r.map(csvCell).join(",")).join("\n") + "\n";
}

// The chart as a standalone SVG document (its size, the chart styles inlined).
function exportSVG(svg) {
  const copy = svg.cloneNode(true);
  const [, , w, h] = (svg.getAttribute("viewBox") || "0 0 600 360").split(" ");
  copy.setAttribute("xmlns", SVG_NS);
  copy.setAttribute("width", w);
  copy.setAttribute("height", h);
  copy.removeAttribute("class");
  copy.removeAttribute("id");
  const style = document.createElementNS(SVG_NS, "style");
  style.textContent = CHART_CSS;
  copy.insertBefore(style, copy.firstChild);
  const bg = document.createElementNS(SVG_NS, "rect");
  for (const [k, v] of Object.entries({ x: 0, y: 0, width: w, height: h, fill: "white" })) bg.setAttribute(k, v);
  copy.insertBefore(bg, style.nextSibling);
  return new XMLSerializer().serializeToString(copy);
}

// The chart as a PNG at twice its size (a Promise of a Blob).
function exportPNG(svg) {
  const text = exportSVG(svg);
  const [, , w, h] = (svg.getAttribute("viewBox") || "0 0 600 360").split(" ").map(Number);
  return new Promise((resolve, reject) => {
    const url = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
    const img = new Image();
    img.onload = () => {
      const canvas = document.createElement("canvas");
      canvas.width = 2 * w;
      canvas.height = 2 * h;
      const ctx = canvas.getContext("2d");
      ctx.scale(2, 2);
      ctx.drawImage(img, 0, 0, w, h);
      URL.revokeObjectURL(url);
      canvas.toBlob(b => (b ? resolve(b) : reject(new Error("PNG export failed"))), "image/png");
    };
    img.onerror = () => { URL.revokeObjectURL(url); reject(new Error("PNG export failed")); };
    img.src = url;
  });
}

function download(name, blob) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

// Adds "CSV · SVG · PNG" buttons under the chart's figure (once).
function addExport(svg) {
  const fig = svg.closest("figure");
  if (!fig || fig.querySelector(".export")) return;
  const bar = document.createElement("div");
  bar.className = "export";
  bar.append("save: ");
  const name = svg.id || "chart";
  const actions = {
    CSV: () => download(`${name}.csv`, new Blob([exportCSV(svg)], { type: "text/csv" })),
    SVG: () => download(`${name}.svg`, new Blob([exportSVG(svg)], { type: "image/svg+xml" })),
    PNG: () => exportPNG(svg).then(b => download(`${name}.png`, b)),
  };
  for (const [label, act] of Object.entries(actions)) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.dataset.export = label.toLowerCase();
    b.addEventListener("click", act);
    bar.appendChild(b);
  }
  fig.appendChild(bar);
}

window.flplot = { drawChart, drawGrid, fmt, exportCSV, exportSVG, exportPNG };
})();
