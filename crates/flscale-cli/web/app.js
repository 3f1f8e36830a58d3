// flscale serve: the three pages. Each view keeps its state in the URL (so it can be shared)
// and asks the JSON API (docs/serve.md) for everything it shows; nothing is computed here.
"use strict";

const $ = id => document.getElementById(id);
const { drawChart, drawGrid, fmt } = window.flplot;
const num = v => (v === null || v === undefined ? NaN : v);
const precise = v => (v === null || v === undefined || !isFinite(v) ? "none" : Number(v.toPrecision(10)).toString());

// Requests in flight; while any is, the header shows "computing…".
let pending = 0;
function busy(delta) {
  pending += delta;
  $("busy").hidden = pending === 0;
  document.body.dataset.busy = pending > 0 ? "yes" : "";
}

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  busy(+1);
  try {
    const r = await fetch(path, opts);
    let v;
    try { v = await r.json(); } catch (e) { throw new Error(`${path} answered ${r.status} without JSON`); }
    if (!r.ok) throw Object.assign(new Error(v.error || `${path} answered ${r.status}`), { status: r.status });
    return v;
  } finally {
    busy(-1);
  }
}

// A shell word: as it is when it is safe, else in single quotes.
function shellWord(w) {
  return /^[A-Za-z0-9_.,:\/=+-]+$/.test(w) ? w : `'${w.replace(/'/g, "'\\''")}'`;
}
const command = words => words.map(shellWord).join(" ");

// The "copy" buttons of the command-line boxes.
for (const b of document.querySelectorAll("button[data-copy]")) {
  b.addEventListener("click", async () => {
    const text = $(b.dataset.copy).textContent;
    try {
      await navigator.clipboard.writeText(text);
      b.textContent = "copied";
    } catch (e) {
      const range = document.createRange();
      range.selectNodeContents($(b.dataset.copy));
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      b.textContent = "selected: press Ctrl-C";
    }
    setTimeout(() => { b.textContent = "copy"; }, 2000);
  });
}

function showError(id, err) {
  const e = $(id);
  e.textContent = err ? String(err.message || err) : "";
  e.hidden = !err;
}

// Requests race while a slider is dragged; only the newest answer is drawn.
function latest(fn) {
  let seq = 0;
  return async (...args) => {
    const mine = ++seq;
    const out = await fn(...args);
    return mine === seq ? out : undefined;
  };
}

// ---------------------------------------------------------------- solvable model
const MODEL_KEYS = ["mode", "u", "b", "c", "sigma_w2", "d", "p", "n", "t", "s_a2"];

function modelQuery() {
  const q = new URLSearchParams();
  for (const k of MODEL_KEYS) {
    const v = $(k).value;
    if (k === "s_a2" && Number(v) === 0) continue;
    if ($("mode").value === "mean-field" && ["p", "n", "t", "s_a2"].includes(k)) continue;
    if ($("mode").value === "finite" && k === "u") continue;
    q.set(k, v);
  }
  if ($("zoom").checked && $("mode").value === "mean-field") q.set("zoom", "1");
  return q;
}

// rho_max=auto: the server widens the ρ range to hold every well (the answer says how far).
const VIEW_GRID = { rho_max: "auto", points: "301", diagram_points: "201" };
const fetchView = latest(q => {
  const full = new URLSearchParams(q);
  full.delete("zoom");
  for (const [k, v] of Object.entries(VIEW_GRID)) full.set(k, v);
  return api("/api/cavity/view?" + full);
});

// The CLI commands that print what the model view shows.
function modelCommand(q, rhoMax) {
  const flag = k => "--" + k.replace("_", "-");
  const residual = ["sigma_w2", "b", "c"].flatMap(k => [flag(k), q.get(k)]);
  const potential = ["flscale", "cavity", "potential", ...residual];
  for (const k of ["u", "p", "n", "t", "s_a2"]) if (q.has(k)) potential.push(flag(k), q.get(k));
  potential.push("--d", q.get("d"), "--rho-max", String(rhoMax), "--points", VIEW_GRID.points, "--json");
  const phase = ["flscale", "cavity", "phase", ...residual, "--d", q.get("d"), "--json"];
  return command(potential) + "\n" + command(phase);
}

// Widens a slider to hold `value` (from the URL): a range input would otherwise clamp it to
// its ends, or round it to its step, without a word. Returns a note when it had to.
function holdValue(input, value) {
  const v = Number(value);
  if (value === null || value === "" || !isFinite(v)) return null;
  let note = null;
  if (v < Number(input.min) || v > Number(input.max)) {
    note = `${input.id.replace(/^(ldt|k)_/, "")} = ${value} lies outside the slider's usual range ${input.min} … ${input.max}; the slider was widened`;
    input.min = Math.min(Number(input.min), v);
    input.max = Math.max(Number(input.max), v);
  }
  const step = Number(input.step);
  if (step > 0 && Math.abs(v / step - Math.round(v / step)) > 1e-9) input.step = "any";
  input.value = value;
  return note;
}

// With "zoom", the u slider spans the transition (fold … spinodal with a margin) instead of
// 0 … 60, where fold → coexistence is a few pixels.
function zoomU(phase) {
  const u = $("u");
  if (!$("zoom").checked || !phase) {
    if (u.dataset.zoomed) {
      u.min = 0; u.max = Math.max(60, Number(u.value)); u.step = 0.05; delete u.dataset.zoomed;
    }
    return;
  }
  const lo = phase.u_fold.u, hi = phase.u_spinodal ? phase.u_spinodal.u : 1.2 * phase.u_coexist.u;
  const pad = 0.1 * (hi - lo || 1), keep = Number(u.value);
  const min = Math.max(0, Math.min(lo - pad, keep)), max = Math.max(hi + pad, keep);
  if (u.dataset.zoomed !== `${min}:${max}`) {
    u.min = min; u.max = max; u.step = "any";
    u.value = keep;
    u.dataset.zoomed = `${min}:${max}`;
  }
}

async function updateModel() {
  syncBoxes("model");
  const finite = $("mode").value === "finite";
  for (const e of document.querySelectorAll(".finite-only")) e.hidden = !finite;
  for (const e of document.querySelectorAll(".mean-field-only")) e.hidden = finite;
  const q = modelQuery();
  history.replaceState(null, "", "/model?" + q);
  let v;
  try {
    v = await fetchView(q);
  } catch (err) {
    showError("model-error", err);
    $("model").dataset.rendered = "error:" + q;
    return;
  }
  if (!v) return;
  showError("model-error", null);
  renderModel(v);
  zoomU(v.phase);
  $("model-cli").textContent = modelCommand(q, v.rho_max);
  $("model").dataset.rendered = q.toString();
}

function renderModel(v) {
  const ph = v.phase, pt = v.point, w = v.wells;
  $("u-value").textContent = precise(pt.u);
  $("phase-label").textContent = pt.phase + (pt.label ? ` (${pt.label})` : "");
  $("phase-description").textContent = "— " + pt.description;
  $("phase-from").textContent = `(from ${pt.from})`;
  const side = w.minima.filter(m => m.rho > 0);
  const outer = Math.max(0, ...w.minima.map(m => m.rho));
  $("wells-here").textContent = (side.length
    ? `side minima at ρ = ${side.map(m => "±" + fmt(m.rho)).join(", ")} (−log p there minus at ρ = 0: ${side.map(m => fmt(m.depth)).join(", ")}), barrier at ${fmt(w.barrier)}; side-well mass ${fmt(w.side_mass)}`
    : "one well, at ρ = 0") + (outer > v.rho_max ? ` — beyond the drawn range |ρ| ≤ ${v.rho_max}` : "");
  $("r-here").textContent = `${precise(w.r_total)} over the posterior at D = ${ph.d}` +
    (w.r_centre !== null && side.length ? `; ${fmt(w.r_centre)} in the centre` : "") +
    (w.r_side !== null ? `, ${fmt(w.r_side)} in the side wells` : "");
  $("transition-kind").textContent = ph.kind;
  $("u-fold").textContent = precise(ph.u_fold.u);
  $("u-coexist").textContent = precise(ph.u_coexist.u);
  $("u-spinodal").textContent = ph.u_spinodal ? precise(ph.u_spinodal.u) : "none (b = 0)";
  $("rho-star").textContent = precise(ph.rho_star);
  $("r-unaligned").textContent = `${precise(ph.r_unaligned_at_d)} at D = ${ph.d} (leading order ${ph.r_unaligned_leading === null ? "diverges" : fmt(ph.r_unaligned_leading)})`;
  $("r-aligned").textContent = `${precise(ph.r_aligned_at_d)} at D = ${ph.d} (leading order ρ*² = ${fmt(ph.r_aligned_leading)}), side-well mass ${fmt(ph.side_weight_at_d)}`;
  const pot = v.potential, curve = pot.curves[0].potential_over_d;
  const min = Math.min(...curve.filter(isFinite));
  const pts = pot.rho.map((x, i) => ({ x, y: curve[i] - min }));
  // The height that shows every well: the curve's top within a little beyond the outermost.
  const inner = pts.filter(p => Math.abs(p.x) <= Math.max(1.2 * outer, 0.6)).map(p => p.y);
  const top = Math.max(...inner.filter(isFinite), 1e-6);
  drawChart($("potential-plot"), {
    series: [{ name: pot.curves[0].label, points: pts }],
    xlabel: "ρ", ylabel: pot.model === "finite" ? "(U − min U)/D" : "(Ũ − min Ũ)/D", title: `${pot.model} potential: ${pot.parameters}`,
    yrange: [-0.05 * top, 1.1 * top],
    vlines: side.flatMap(m => [{ x: -m.rho, label: "−ρ*" }, { x: m.rho, label: `ρ* = ${fmt(m.rho)}` }]),
  }, $("tooltip"));
  drawChart($("diagram-plot"), diagramChart(v), $("tooltip"));
}

// The (c, u) diagram with the current point. A point far above the lines (the finite model's
// u is often thousands) switches the u axis to log scale so that the point stays on it.
function diagramChart(v) {
  const rows = v.diagram.rows, ph = v.phase, pt = v.point;
  const us = rows.flatMap(r => [num(r.u_fold), num(r.u_coexist)]).concat([num(ph.u_spinodal && ph.u_spinodal.u)]);
  const umax = Math.max(...us.filter(isFinite)) * 1.1;
  const ylog = pt.u > 3 * umax;
  const positive = us.filter(u => isFinite(u) && u > 0);
  const yrange = ylog ? [Math.min(...positive) / 1.5, pt.u * 2] : [0, Math.max(umax, 1.1 * pt.u)];
  return {
    series: [
      { name: "u_fold", points: rows.map(r => ({ x: r.c, y: num(r.u_fold) })), dash: "5 3" },
      { name: "u_coexist", points: rows.map(r => ({ x: r.c, y: num(r.u_coexist) })) },
      { name: "u_spinodal", points: rows.map(r => ({ x: r.c, y: num(r.u_spinodal) })), dash: "2 3" },
    ],
    xlabel: "c", ylabel: "u", ylog, yrange,
    marker: { x: pt.c, y: pt.u, label: pt.phase },
  };
}

function showNotes(id, notes) {
  $(id).textContent = notes.join("; ");
  $(id).hidden = !notes.length;
}

// The number boxes beside a section's sliders show the slider's value (unless being typed in).
function syncBoxes(section) {
  for (const box of document.querySelectorAll(`#${section} input.num`)) {
    if (document.activeElement !== box) box.value = $(box.dataset.for).value;
  }
}

// A typed value goes to its slider, which widens (with a note) rather than clamp it.
function bindBoxes(section, noteId, update) {
  for (const box of document.querySelectorAll(`#${section} input.num`)) {
    box.addEventListener("change", () => {
      const note = holdValue($(box.dataset.for), box.value);
      if (note) showNotes(noteId, [note]);
      update();
    });
  }
}

function initModel() {
  // The controls are a form only for their labels; Enter must not submit (and navigate).
  // Here rather than an inline onsubmit: the page's Content-Security-Policy runs no inline script.
  $("model-controls").addEventListener("submit", e => e.preventDefault());
  const q = new URLSearchParams(location.search);
  const notes = [];
  for (const k of MODEL_KEYS) {
    if (!q.has(k)) continue;
    if ($(k).type === "range") {
      const note = holdValue($(k), q.get(k));
      if (note) notes.push(note);
    } else {
      $(k).value = q.get(k);
    }
  }
  $("zoom").checked = q.get("zoom") === "1";
  showNotes("model-note", notes);
  for (const k of MODEL_KEYS) $(k).addEventListener("input", updateModel);
  bindBoxes("model", "model-note", updateModel);
  $("zoom").addEventListener("change", updateModel);
  updateModel();
}

// ---------------------------------------------------------------- scaling engine
const fetchPredict = latest(body => api("/api/predict", body));
let engineTimer = null;

function engineChanged() {
  clearTimeout(engineTimer);
  engineTimer = setTimeout(updateEngine, 250);
}

// The preset's own text, to tell an edited TOML from it.
let presetText = "";

async function updateEngine() {
  const body = { toml: $("toml").value };
  const at = $("at").value.trim(), axes = $("phase-axes").value.trim();
  const range = $("phase-range").value.trim() || "0:6", grid = Number($("phase-grid").value) || 17;
  if (at) body.at = at;
  if (axes) { body.phase = axes; body.range = range; body.grid = grid; }
  // The state in the URL: the settings in the query, an edited TOML in the fragment (never
  // sent to the server, so it may be long), so that a reload or a shared link shows the same.
  const q = new URLSearchParams();
  if ($("preset").value) q.set("preset", $("preset").value);
  if (at) q.set("at", at);
  if (axes) q.set("phase", axes);
  if (range !== "0:6") q.set("range", range);
  if (grid !== 17) q.set("grid", String(grid));
  const edited = $("toml").value !== presetText;
  history.replaceState(null, "", "/engine?" + q + (edited ? "#toml=" + encodeURIComponent($("toml").value) : ""));
  $("engine-cli").textContent = engineCommand(edited, at, axes, range, grid);
  let v, mapError = null;
  try {
    v = await fetchPredict(body);
  } catch (err) {
    // A phase map too heavy for the server right now (503) must not hide the prediction:
    // ask again without the map and say why it is missing.
    if (body.phase && err.status === 503) {
      mapError = err;
      const { phase, range, grid, ...plain } = body;
      try { v = await fetchPredict(plain); } catch (err2) { v = null; mapError = err2; }
    }
    if (!v) {
      showError("toml-error", mapError || err);
      $("engine").dataset.rendered = "error";
      return;
    }
  }
  if (!v) return;
  showError("toml-error", null);
  showError("phase-map-error", mapError && `no phase map: ${mapError.message}`);
  renderEngine(v, axes);
  $("engine").dataset.rendered = "ok:" + ($("toml").value.length);
}

// The CLI command of the engine view (an edited TOML must be saved as a file first).
function engineCommand(edited, at, axes, range, grid) {
  const words = ["flscale", "predict"];
  if (edited) words.push("arch.toml"); else words.push("--preset", $("preset").value);
  if (at) words.push("--at", at);
  if (axes) words.push("--phase", axes, "--range", range, "--grid", String(grid));
  const text = command(words);
  return edited ? "# save the editor's TOML as arch.toml, then\n" + text : text;
}

function renderEngine(v, axes) {
  const p = v.prediction;
  $("exponent").textContent = p.p_star_exponent === null ? "none (nothing aligns)" : p.p_star_exponent;
  $("exponent-float").textContent = p.p_star_exponent_float === null ? "" : `(${fmt(p.p_star_exponent_float)})`;
  $("winners").textContent = p.winners.join(", ");
  $("reading").textContent = p.reading;
  $("engine-notes").textContent = (v.notes || []).join(" ");
  const rows = p.patterns.slice().sort((a, b) => num(a.exponent_float) - num(b.exponent_float));
  const table = $("patterns");
  table.innerHTML = "<tr><th>pattern</th><th>Ẽ optimum</th><th>exponent of Ẽ</th><th>binding</th></tr>";
  for (const r of rows.slice(0, 40)) {
    const tr = table.insertRow();
    if (p.winners.includes(r.name)) tr.className = "winner";
    for (const c of [r.name, r.optimum, r.exponent === null ? "∞" : r.exponent, (r.binding || []).join(", ")]) {
      tr.insertCell().textContent = c;
    }
  }
  const map = v.phase_map;
  const svg = $("phase-map");
  svg.parentElement.hidden = !map;
  if (map) {
    drawGrid(svg, map.grid, map.cells, map.winner_sets, map.axes[0], map.axes[1]);
    $("phase-map-caption").textContent = "winner over (log_d " + map.axes.join(", log_d ") + "); boundaries: " + map.boundaries.join("; ");
  }
}

async function loadPreset(name, toml) {
  const v = await api("/api/presets/" + encodeURIComponent(name));
  presetText = v.toml;
  $("toml").value = toml === undefined ? v.toml : toml;
  if (!new URLSearchParams(location.search).has("phase")) {
    const m = v.toml.match(/widths\s*=\s*\[([^\]]*)\]/);
    const names = m ? m[1].split(",").map(s => s.replace(/["'\s]/g, "")).filter(Boolean) : [];
    $("phase-axes").value = names.length >= 2 ? names.slice(0, 2).join(",") : "";
  }
  await updateEngine();
}

async function initEngine() {
  const q = new URLSearchParams(location.search);
  const list = (await api("/api/presets")).presets;
  for (const p of list) {
    const o = document.createElement("option");
    o.value = p.name;
    o.textContent = `${p.name} — ${p.summary}`;
    $("preset").appendChild(o);
  }
  $("preset").value = q.get("preset") || "fcn3-erf-he3";
  if (q.has("at")) $("at").value = q.get("at");
  if (q.has("phase")) $("phase-axes").value = q.get("phase");
  if (q.has("range")) $("phase-range").value = q.get("range");
  if (q.has("grid")) $("phase-grid").value = q.get("grid");
  const hash = new URLSearchParams(location.hash.slice(1));
  $("preset").addEventListener("change", () => loadPreset($("preset").value));
  for (const id of ["toml", "at", "phase-axes", "phase-range", "phase-grid"]) $(id).addEventListener("input", engineChanged);
  await loadPreset($("preset").value, hash.has("toml") ? hash.get("toml") : undefined);
}

// ---------------------------------------------------------------- large deviations
const LDT_KEYS = ["d", "n", "alpha", "sigma1_sq", "sigma2_sq", "kappa"];
const fetchLdt = latest(q => api("/api/ldt/view?" + q));
let ldtTimer = null;

function ldtQuery() {
  const q = new URLSearchParams();
  for (const k of LDT_KEYS) q.set(k, $("ldt_" + k).value);
  return q;
}

// The CLI commands that print what the page shows: the rate at the page's α grid and the
// tilted law at the chosen α (`--perp prior`, `--beta-max 3`, `--grid 241` are the defaults).
function ldtCommand(q, alphas) {
  const model = ["d", "n", "sigma1_sq", "sigma2_sq"].flatMap(k => ["--" + k.replace("_", "-"), q.get(k)]);
  return command(["flscale", "ldt", "rate", ...model, "--alpha", alphas.join(","), "--kappa", q.get("kappa"), "--json"]) + "\n" +
    command(["flscale", "ldt", "tilted", ...model, "--alpha", q.get("alpha"), "--json"]);
}

async function updateLdt() {
  syncBoxes("ldt");
  const q = ldtQuery();
  history.replaceState(null, "", "/ldt?" + q);
  let v;
  try {
    v = await fetchLdt(q);
  } catch (err) {
    showError("ldt-error", err);
    $("ldt").dataset.rendered = "error:" + q;
    return;
  }
  if (!v) return;
  showError("ldt-error", null);
  const alpha = Number(q.get("alpha"));
  const pts = v.rate.points, here = pts.find(p => p.alpha === alpha) || {};
  $("ldt-rate").textContent = precise(here.rate);
  $("ldt-tstar").textContent = precise(here.t_star);
  $("ldt-pstar").textContent = precise(here.p_star);
  const t = v.tilted;
  $("ldt-shape").textContent = t.bimodal
    ? `peaks at β = ±${fmt(t.beta_star)} hold ${fmt(t.side_mass)} of the mass (${fmt(t.specialised_neurons)} of N = ${t.model.n} neurons specialised)`
    : "one peak, at β = 0";
  drawChart($("rate-plot"), {
    series: [{ name: "E(α)", dots: true, points: pts.map(p => ({ x: p.alpha, y: p.rate, note: `t* = ${fmt(p.t_star)}, P* ∝ ${fmt(p.p_star)}` })) }],
    xlog: true, ylog: true, xlabel: "α", ylabel: "E(α)",
    marker: { x: alpha, y: here.rate, label: `α = ${alpha}` },
  }, $("tooltip"));
  const dens = t.density.filter(([, p]) => p > 0);
  const top = Math.max(...dens.map(([, p]) => p));
  drawChart($("tilted-plot"), {
    series: [{ name: `t* = ${fmt(t.t)}`, points: dens.map(([b, p]) => ({ x: b, y: -Math.log(p / top) })) }],
    xlabel: "β", ylabel: "−log p(β) + log max p",
    vlines: t.bimodal ? [{ x: -t.beta_star, label: "−β*" }, { x: t.beta_star, label: "β*" }] : [],
  }, $("tooltip"));
  $("ldt-cli").textContent = ldtCommand(q, v.alphas);
  $("ldt").dataset.rendered = q.toString();
}

function initLdt() {
  $("ldt-controls").addEventListener("submit", e => e.preventDefault());
  const q = new URLSearchParams(location.search);
  const notes = [];
  for (const k of LDT_KEYS) {
    if (!q.has(k)) continue;
    const note = holdValue($("ldt_" + k), q.get(k));
    if (note) notes.push(note);
  }
  showNotes("ldt-note", notes);
  const later = () => { clearTimeout(ldtTimer); ldtTimer = setTimeout(updateLdt, 120); };
  for (const k of LDT_KEYS) $("ldt_" + k).addEventListener("input", later);
  bindBoxes("ldt", "ldt-note", updateLdt);
  updateLdt();
}

// ---------------------------------------------------------------- kernel propagation
const KERNEL_SLIDERS = ["d", "n1", "n2", "p", "seed"];
const fetchKernel = latest(q => api("/api/kernel/view?" + q));
let kernelTimer = null;

function kernelQuery() {
  const q = new URLSearchParams();
  q.set("data", $("k_data").value);
  q.set("activation", $("k_activation").value);
  if ($("k_layernorm").checked) q.set("layernorm", "1");
  for (const k of KERNEL_SLIDERS) q.set(k, $("k_" + k).value);
  return q;
}

// The CLI command that prints the same object.
function kernelCommand(q) {
  const words = ["flscale", "kernel", "propagate", "--quick", "--data", q.get("data"), "--activation", q.get("activation")];
  if (q.has("layernorm")) words.push("--layernorm");
  for (const k of KERNEL_SLIDERS) words.push("--" + k, q.get(k));
  return command([...words, "--json"]);
}

async function updateKernel() {
  syncBoxes("kernel");
  const q = kernelQuery();
  history.replaceState(null, "", "/kernel?" + q);
  let v;
  try {
    v = await fetchKernel(q);
  } catch (err) {
    showError("kernel-error", err);
    $("kernel").dataset.rendered = "error:" + q;
    return;
  }
  if (!v) return;
  showError("kernel-error", null);
  $("k-slope-rkhs").textContent = precise(v.slope_rkhs);
  $("k-slope-inv").textContent = precise(v.slope_inverse_expectation);
  $("k-predicted").textContent = precise(v.predicted_slope);
  $("k-phi").textContent = precise(v.phi_star_eigenvalue);
  $("k-method").textContent = v.method;
  const [lo, hi] = v.config.fit_window;
  drawChart($("kernel-plot"), {
    series: [
      { name: "RKHS norm of Φ*²", dots: true, points: v.points.map(p => ({ x: p.amplification, y: p.rkhs_norm, note: `${p.kept_eigenvalues} eigenvalues kept` })) },
      { name: "inverse expectation of Φ*²", dots: true, points: v.points.map(p => ({ x: p.amplification, y: p.inverse_expectation })) },
    ],
    xlog: true, ylog: true, xlabel: "D (amplification)", ylabel: "value",
    vlines: [{ x: lo, label: "fit" }, { x: hi, label: "" }],
  }, $("tooltip"));
  $("kernel-cli").textContent = kernelCommand(q);
  $("kernel").dataset.rendered = q.toString();
}

function initKernel() {
  $("kernel-controls").addEventListener("submit", e => e.preventDefault());
  const q = new URLSearchParams(location.search);
  if (q.has("data")) $("k_data").value = q.get("data");
  if (q.has("activation")) $("k_activation").value = q.get("activation");
  $("k_layernorm").checked = q.get("layernorm") === "1";
  const notes = [];
  for (const k of KERNEL_SLIDERS) {
    if (!q.has(k)) continue;
    const note = holdValue($("k_" + k), q.get(k));
    if (note) notes.push(note);
  }
  showNotes("kernel-note", notes);
  const later = () => { clearTimeout(kernelTimer); kernelTimer = setTimeout(updateKernel, 250); };
  for (const k of KERNEL_SLIDERS) $("k_" + k).addEventListener("input", later);
  for (const id of ["k_data", "k_activation", "k_layernorm"]) $(id).addEventListener("change", updateKernel);
  bindBoxes("kernel", "kernel-note", updateKernel);
  updateKernel();
}

// ---------------------------------------------------------------- results
async function initResults(index) {
  const list = (await api("/api/results")).results;
  const ul = $("results-list");
  ul.innerHTML = list.length ? "" : "<li>No results directories: start the server with --results DIR.</li>";
  for (const r of list) {
    const li = document.createElement("li");
    li.innerHTML = `<a href="/results/${r.index}"></a> <span class="muted"></span>`;
    li.firstChild.textContent = r.name;
    li.lastChild.textContent = r.path;
    ul.appendChild(li);
  }
  if (index === null) return;
  let v;
  try {
    v = await api("/api/results/" + index);
  } catch (err) {
    showError("results-error", err);
    return;
  }
  $("results-view").hidden = false;
  v.index = Number(index);
  $("results-cli").textContent = v.cli.join("\n");
  let other = await compareWith(list, index);
  renderResults(v, index, other);
  $("obs-logy").addEventListener("change", () => renderResults(v, index, other));
  $("compare").addEventListener("change", async () => {
    other = await compareWith(list, index, $("compare").value);
    renderResults(v, index, other);
  });
  $("results").dataset.rendered = "ok";
}

// P* per group with the interval `pstar` reports including the bracket (hollow: the crossing
// is only bracketed), the fitted line and the predicted slope through its centre; `other`, a
// second store's answer, adds its P* and fit (each series named by its store).
function pstarChart(v, other) {
  const t = v.pstar;
  const ps = pstarSeries(v, other ? `${v.name} (#${v.index}): ` : "", 0);
  if (other) ps.push(...pstarSeries(other, `${other.name} (#${other.index}): `, 3));
  return { series: ps, xlog: true, ylog: true, xlabel: t ? t.group : v.analysis.group, ylabel: "P*" };
}

function pstarSeries(v, prefix, colorBase) {
  const t = v.pstar, f = v.fit;
  const color = k => ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"][colorBase + k];
  const rows = t ? t.rows.filter(r => r.pstar !== null) : [];
  const ps = [{ name: prefix + "P* (95 % with bracket)", color: color(0), dots: true, line: false, points: rows.map(r => {
    const [lo, hi] = r.ci95_with_bracket || r.ci95 || [null, null];
    return { x: r.group, y: r.pstar, err: r.err, lo, hi, open: !r.resolved,
      note: `bracket [${r.bracket.map(fmt).join(", ")}] ${r.resolved ? "ok" : "only bracketed"}` };
  }) }];
  if (f && f.points.length >= 2) {
    // The fit is ln P* = intercept + exponent·ln x; the predicted slope is drawn through the
    // fit's value at the points' geometric centre.
    const gx = f.points.map(p => p[0]);
    const x0 = Math.exp(gx.reduce((s, x) => s + Math.log(x), 0) / gx.length);
    const y0 = Math.exp(f.intercept) * Math.pow(x0, f.exponent);
    const line = slope => [Math.min(...gx), Math.max(...gx)].map(x => ({ x, y: y0 * Math.pow(x / x0, slope) }));
    const name = f.exponent_claimed ? `fit: slope ${fmt(f.exponent)}` : `slope through the points ${fmt(f.exponent)} (no exponent claimed)`;
    ps.push({ name: prefix + name, color: color(1), points: line(f.exponent), dash: f.exponent_claimed ? "" : "2 3" });
    if (f.predicted) ps.push({ name: `${prefix}predicted: slope ${f.predicted.exact}`, color: color(2), dash: "6 4", points: line(f.predicted.value) });
  }
  return ps;
}

// The fit's verdict as `flscale fit` words it: the exponent only where the fit claims one,
// else the slope through the points, named as such.
function claimText(f) {
  const pm = f.err === null ? "" : " ± " + fmt(f.err);
  if (!f.exponent_claimed) {
    return `no exponent claimed from ${f.points.length} point(s); the slope through them is ${fmt(f.exponent)}${pm}`;
  }
  return `measured exponent ${fmt(f.exponent)}${pm}` + (f.ci95 ? ` (95 % interval ${f.ci95.map(fmt).join(" … ")})` : "");
}

// Every flag, warning and note of `fit --json` and `pstar --json`, each once.
function resultWarnings(v) {
  const out = [];
  const add = (kind, text) => { if (text && !out.some(o => o[1] === text)) out.push([kind, text]); };
  if (v.fit_error) add("flscale fit refuses", v.fit_error);
  if (v.pstar_error) add("flscale pstar refuses", v.pstar_error);
  for (const r of [v.fit, v.pstar].filter(Boolean)) {
    for (const w of r.fit_warnings || []) add("warning", w);
    add("warning", r.step_bias);
  }
  for (const n of (v.fit && v.fit.unresolved) || []) add("note", n);
  for (const k of (v.fit && v.fit.skipped) || []) add("left out", k);
  if (v.fit) add("note", v.fit.mu_rule);
  for (const n of v.notes) add("note", n);
  add("note", (v.fit || v.pstar || {}).equilibration);
  return out;
}

// The store chosen for comparison (`?compare=J` in the URL, or `choice`), fetched; null for
// none. Its commands join the command box.
async function compareWith(list, index, choice) {
  const others = list.filter(r => String(r.index) !== String(index));
  $("compare-box").hidden = !others.length;
  const sel = $("compare");
  if (sel.options.length === 1) {
    for (const r of others) {
      const o = document.createElement("option");
      o.value = String(r.index);
      o.textContent = `#${r.index} ${r.name} (${r.path})`;
      sel.appendChild(o);
    }
  }
  const q = new URLSearchParams(location.search);
  if (choice !== undefined) {
    if (choice) q.set("compare", choice); else q.delete("compare");
    history.replaceState(null, "", location.pathname + (q.toString() ? "?" + q : ""));
  }
  const j = q.get("compare") || "";
  sel.value = others.some(r => String(r.index) === j) ? j : "";
  if (!sel.value) return null;
  let o;
  try {
    o = await api("/api/results/" + sel.value);
  } catch (err) {
    showError("results-error", err);
    return null;
  }
  o.index = Number(sel.value);
  return o;
}

function renderResults(v, index, other) {
  const a = v.analysis;
  $("results-name").textContent = v.name;
  $("results-progress").textContent = `${v.finished} of ${v.total} runs finished`;
  const f = v.fit;
  $("results-exponent").textContent = f ? claimText(f) : "none (flscale fit refuses this store; see below)";
  $("results-exponent").dataset.claimed = f && f.exponent_claimed ? "yes" : "no";
  $("results-predicted").textContent = f && f.predicted ? `${f.predicted.exact} (${f.predicted.description})` : "none";
  const without = f && f.without_bracket && f.without_bracket.err !== null
    ? `; the grid's brackets included (seeds and chains alone ± ${fmt(f.without_bracket.err)})` : "";
  $("results-what").textContent = f ? `${f.what}${without}` : "";
  const list = $("results-warnings");
  list.innerHTML = "";
  for (const [kind, text] of resultWarnings(v)) {
    const li = document.createElement("li");
    li.className = kind === "note" ? "muted" : "warning";
    li.append(`${kind}: ${text}`);
    list.appendChild(li);
  }
  const series = v.series.map(s => ({
    name: `${a.group} = ${fmt(s.group)}`, dots: true,
    points: s.points.map(p => ({ x: p.x, y: p.y, err: p.err, open: p.equilibrated === false,
      note: `${p.chains} chains${p.equilibrated === false ? ", NOT equilibrated" : ""}` })),
  }));
  const xs = v.series.flatMap(s => s.points.map(p => p.x));
  if (xs.length) series.push({ name: `threshold ${a.threshold}`, color: "#888", dash: "4 3",
    points: [{ x: Math.min(...xs), y: a.threshold }, { x: Math.max(...xs), y: a.threshold }] });
  drawChart($("obs-plot"), { series, xlog: true, ylog: $("obs-logy").checked, xlabel: a.x, ylabel: a.observable }, $("tooltip"));
  drawChart($("pstar-plot"), pstarChart(v, other), $("tooltip"));
  $("results-cli").textContent = v.cli.concat(other ? other.cli : []).join("\n");
  const figs = $("results-figures");
  figs.innerHTML = "";
  for (const name of v.figures.filter(n => n.endsWith(".svg"))) {
    const img = document.createElement("img");
    img.src = `/results/${index}/files/${name}`;
    img.alt = name;
    figs.appendChild(img);
  }
  const table = $("runs-table");
  const coords = v.runs.length ? Object.keys(v.runs[0].coordinates) : [];
  table.innerHTML = "";
  const head = table.insertRow();
  for (const h of ["#", ...coords, a.observable, "chains ok", "equilibrated"]) head.insertCell().textContent = h;
  for (const r of v.runs) {
    const tr = table.insertRow();
    const o = r.observables[a.observable];
    const cells = [r.index, ...coords.map(k => fmt(r.coordinates[k])),
      o ? `${fmt(o.mean)}${o.err === null ? "" : " ± " + fmt(o.err)}` : "–",
      `${r.chains_ok}/${r.chains}`, r.equilibrated === null ? "not checked" : r.equilibrated ? "yes" : "NO"];
    for (const c of cells) tr.insertCell().textContent = c;
  }
}

// ---------------------------------------------------------------- routing
function route() {
  const parts = location.pathname.split("/").filter(Boolean);
  const view = ["model", "engine", "ldt", "kernel", "results"].includes(parts[0]) ? parts[0] : "model";
  for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== view;
  for (const a of document.querySelectorAll("header a")) a.classList.toggle("active", a.dataset.view === view);
  if (view === "model") initModel();
  if (view === "engine") initEngine().catch(err => showError("toml-error", err));
  if (view === "ldt") initLdt();
  if (view === "kernel") initKernel();
  if (view === "results") initResults(parts.length > 1 ? parts[1] : null).catch(err => showError("results-error", err));
}

route();
