"use strict";
// The benchmark pages: queue a benchmark, its jobs and stored runs, a run's
// report (the curves `tuner bench plot` draws), and the regression gate's
// verdict between two runs. Uses api, $, esc, fmtNum, fmtDur, progress,
// copyButton and showSection of app.js.

// benchRoute shows the page of a benchmark hash (#/bench, #/run/ID,
// #/compare/BASE/NEW); false for other hashes.
function benchRoute() {
  const h = location.hash;
  let m;
  if (h === "#/bench") { showSection("bench"); loadBench(); return true; }
  if ((m = h.match(/^#\/run\/([^/]+)$/))) { showSection("run"); showRun(decodeURIComponent(m[1])); return true; }
  if ((m = h.match(/^#\/compare\/([^/]+)\/([^/?]+)(?:\?(.*))?$/))) {
    showSection("compare");
    showCompare(decodeURIComponent(m[1]), decodeURIComponent(m[2]), m[3] || "");
    return true;
  }
  return false;
}

// benchEvent refreshes the benchmark page on a job event.
function benchEvent(e) {
  if (!$("#bench").hidden) loadBench();
}

const when = (t) => (t || "").replace("T", " ").slice(0, 16);
const loadOf = (l) => l.concurrency ? `c=${l.concurrency}` : `${fmtNum(l.rate, 2)} req/s`;
const labelTags = (labels) => Object.entries(labels || {}).map(([k, v]) => `<span class="tag">${esc(k)}=${esc(v)}</span>`).join("") || "–";

async function loadBench() {
  const [jobs, runs] = await Promise.all([api("/jobs"), api("/runs")]);
  const tb = $("#benchjobs tbody");
  tb.innerHTML = "";
  for (const j of jobs.filter((j) => j.kind === "bench").reverse()) {
    const e = progress[j.id] || {};
    const state = e.state && j.state === "running" ? e.state : j.state;
    const pct = e.total ? Math.min(100, 100 * e.done / e.total) : 0;
    const tr = document.createElement("tr");
    tr.dataset.job = j.id;
    tr.innerHTML = `<td>${esc(j.id)}</td><td class="state state-${esc(state)}">${esc(state)}</td>
      <td class="progress">${e.phase === "bench" ? `<span class="bar"><span style="width:${pct}%"></span></span>level ${e.done}/${e.total} · ${fmtDur(e.elapsed_s)} elapsed · ETA ${fmtDur(e.eta_s)}${e.running && e.done < e.total ? ` · ${esc(e.running)}` : ""}` : esc(j.error || "")}</td>
      <td>${(j.bench_runs || []).map((r) => `<a href="#/run/${encodeURIComponent(r)}">${esc(r)}</a>`).join(" ")}</td>
      <td>${j.state === "queued" || j.state === "running" ? `<button class="small cancel">cancel</button>` : ""}</td>`;
    const c = $(".cancel", tr);
    if (c) c.onclick = () => api(`/jobs/${j.id}/cancel`, { method: "POST" }).then(loadBench, alert);
    tb.appendChild(tr);
  }
  const rb = $("#runs tbody");
  rb.innerHTML = "";
  for (const r of runs.slice().reverse()) {
    const tr = document.createElement("tr");
    tr.dataset.run = r.id;
    tr.innerHTML = `<td><a href="#/run/${encodeURIComponent(r.id)}">${esc(r.id)}</a></td><td class="state-${esc(r.state)}">${esc(r.state)}</td>
      <td title="${esc(r.model)}">${esc(r.model.split("/").pop())}</td><td>${r.gpu && r.gpu.name ? `${esc(r.gpu.count)}× ${esc(r.gpu.name)}` : "–"}</td>
      <td>${esc(r.engine)} ${esc(r.engine_version || "")}</td><td>${esc(r.tier || "–")}</td><td>${labelTags(r.labels)}</td>
      <td>${esc(r.matrix)}</td><td class="num">${r.cells.length} × ${fmtNum(r.requests, 0)}</td><td title="${esc(r.start)}">${esc(when(r.start).slice(5))}</td>`;
    rb.appendChild(tr);
  }
  // The compare form offers finished runs: base defaults to the older of
  // the two newest, new to the newest, until the user picks one.
  const done = runs.filter((r) => r.state !== "running" && r.cells.length);
  for (const [sel, pick] of [["#cmpbase", done.length - 2], ["#cmpnew", done.length - 1]]) {
    const el = $(sel), keep = el.dataset.picked && el.value;
    el.innerHTML = done.map((r) => `<option value="${esc(r.id)}">${esc(r.id)} · ${esc(r.model.split("/").pop())} · ${esc(Object.entries(r.labels || {}).map(([k, v]) => k + "=" + v).join(",") || when(r.start))}</option>`).join("");
    el.value = keep && done.some((r) => r.id === keep) ? keep : (done[Math.max(0, pick)] || {}).id || "";
  }
}

// The form: engine fields only when tuner starts the server; the YAML box
// only for a custom matrix.
function benchFormFields() {
  const f = $("#benchform");
  const url = f.engine.value === "url";
  f.querySelectorAll(".for-url").forEach((el) => (el.hidden = !url));
  f.querySelectorAll(".for-engine").forEach((el) => (el.hidden = url));
  $(".for-yaml", f).hidden = f.tier.value !== "";
}
$("#benchform").engine.addEventListener("change", benchFormFields);
$("#benchform").tier.addEventListener("change", benchFormFields);
benchFormFields();

$("#benchform").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const spec = { kind: "bench", model: f.get("model"), gpus: +f.get("gpus") };
  if (f.get("gpu")) spec.gpu = f.get("gpu");
  if (f.get("engine") === "url") {
    spec.url = f.get("url");
  } else {
    spec.engine = f.get("engine");
    spec.config = f.get("config");
    const args = (f.get("engine_args") || "").trim();
    if (args) spec.engine_args = args.split(/\s+/);
  }
  if (f.get("tier")) spec.tier = f.get("tier");
  else {
    spec.matrix_yaml = f.get("matrix_yaml");
    if (f.get("tierlabel")) spec.tier = f.get("tierlabel");
  }
  const labels = (f.get("labels") || "").split(",").map((s) => s.trim()).filter(Boolean);
  if (labels.length) spec.labels = labels;
  $("#bencherr").textContent = "";
  try {
    await api("/jobs", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(spec) });
    loadBench();
  } catch (e) { $("#bencherr").textContent = e.message; }
});

for (const sel of ["#cmpbase", "#cmpnew"]) $(sel).addEventListener("change", (ev) => (ev.target.dataset.picked = "1"));
$("#compareform").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const q = f.get("threshold") ? `?threshold=${encodeURIComponent(f.get("threshold"))}` : "";
  location.hash = `#/compare/${encodeURIComponent(f.get("base"))}/${encodeURIComponent(f.get("new"))}${q}`;
});

// ---- a run's report
let currentRun = null;
async function showRun(id) {
  const r = await api(`/runs/${encodeURIComponent(id)}`);
  currentRun = r;
  $("#runtitle").textContent = `Run ${r.id}: ${r.model} · ${r.matrix} · ${r.state}`;
  const dur = r.end ? (Date.parse(r.end) - Date.parse(r.start)) / 1000 : null;
  const meta = [
    ["state", `<span class="state-${esc(r.state)}">${esc(r.state)}</span>${r.reason ? " · " + esc(r.reason) : ""}`],
    ["model", esc(r.model)],
    ["GPU", r.gpu && r.gpu.name ? `${esc(r.gpu.count)}× ${esc(r.gpu.name)}` : "–"],
    ["engine", `${esc(r.engine)} ${esc(r.engine_version || "")}`],
    ["matrix", `${esc(r.matrix)} <small>(${esc(r.matrix_hash)})</small>`],
    ["tier", esc(r.tier || "–")],
    ["labels", labelTags(r.labels)],
    ["started", `${esc(when(r.start))}${dur != null ? ` · ${fmtDur(dur)}` : ""}`],
    ["command", r.flags ? `<code>${esc(r.flags.join(" "))}</code>` : "–"],
  ];
  $("#runmeta tbody").innerHTML = meta.map(([k, v]) => `<tr><td>${k}</td><td>${v}</td></tr>`).join("");
  renderCells(r);
  loadPlot();
}

// renderCells draws each cell's levels x metrics with units.
function renderCells(r) {
  const box = $("#runcells");
  box.innerHTML = "";
  for (const c of r.cells || []) {
    const card = document.createElement("div");
    card.className = "card cell";
    const lat = (d, k) => `<td class="num">${fmtNum(d[k], 2)}</td>`;
    const rows = (c.levels || []).map((l) => {
      const m = l.metrics;
      return `<tr><td>${esc(loadOf(l))}</td><td class="num">${fmtNum(m.request_throughput, 2)}</td><td class="num">${fmtNum(m.output_throughput)}</td>
        <td class="num">${fmtNum(m.total_token_throughput)}</td><td class="num">${fmtNum(m.request_goodput, 2)}</td><td class="num">${fmtNum(100 * l.success_rate)}%</td>
        ${lat(m.ttft_ms, "median")}${lat(m.ttft_ms, "p99")}${lat(m.tpot_ms, "median")}${lat(m.tpot_ms, "p99")}${lat(m.itl_ms, "median")}${lat(m.itl_ms, "p99")}${lat(m.e2el_ms, "median")}${lat(m.e2el_ms, "p99")}
        <td>${l.stability && l.stability.stable ? "yes" : "no"}</td><td class="${l.slo_met ? "state-ok" : "state-failed"}">${l.slo_met ? "met" : esc((l.violations || []).join(", ") || "missed")}</td></tr>`;
    }).join("");
    card.innerHTML = `<h3>cell ${esc(c.name)} <small>${fmtNum(c.requests, 0)} requests${c.capacity ? ` · capacity at SLO ${fmtNum(c.capacity, 2)}` : ""}${c.error ? ` · stopped: ${esc(c.error)}` : ""}</small></h3>
      <table class="report"><thead><tr><th>Load</th><th>req/s</th><th>out tok/s</th><th>total tok/s</th><th>goodput req/s</th><th>success</th>
      <th>TTFT p50 (ms)</th><th>TTFT p99 (ms)</th><th>TPOT p50 (ms)</th><th>TPOT p99 (ms)</th><th>ITL p50 (ms)</th><th>ITL p99 (ms)</th><th>E2EL p50 (ms)</th><th>E2EL p99 (ms)</th>
      <th>stable</th><th>SLO</th></tr></thead><tbody>${rows}</tbody></table>`;
    box.appendChild(card);
  }
}

// loadPlot inlines the SVG `tuner bench plot` draws (fetched with the
// token, so it works behind one).
async function loadPlot() {
  if (!currentRun) return;
  const box = $("#runplot");
  try {
    box.innerHTML = await api(`/runs/${encodeURIComponent(currentRun.id)}/plot?metric=${encodeURIComponent($("#plotmetric").value)}`);
  } catch (e) { box.innerHTML = `<p class="err">${esc(e.message)}</p>`; }
}
$("#plotmetric").addEventListener("change", loadPlot);

// download fetches a text file with the token and saves it.
async function download(path, name) {
  const headers = tokenInput.value ? { Authorization: "Bearer " + tokenInput.value } : {};
  const r = await fetch("/api/v1" + path, { headers });
  if (!r.ok) { alert((await r.json()).message); return; }
  const a = document.createElement("a");
  a.href = URL.createObjectURL(await r.blob());
  a.download = name;
  a.click();
  URL.revokeObjectURL(a.href);
}
$("#rawcsv").addEventListener("click", () => currentRun && download(`/runs/${encodeURIComponent(currentRun.id)}/raw`, `${currentRun.id}.csv`));
$("#runmd").addEventListener("click", async () => {
  if (!currentRun) return;
  const md = await api(`/runs/${encodeURIComponent(currentRun.id)}?format=md`);
  try { await navigator.clipboard.writeText(md); } catch (e) { /* no clipboard permission */ }
  window.lastCopied = md;
  $("#runmd").textContent = "copied";
  setTimeout(() => ($("#runmd").textContent = "copy report as Markdown"), 1500);
});

// ---- the regression gate between two runs
const pFmt = (p) => p == null ? "–" : p < 1e-4 ? "<0.0001" : p.toFixed(4);
const valFmt = (v, unit) => v == null ? "–" : `${fmtNum(v, unit === "ms" ? 2 : 1)} ${esc(unit)}`;
async function showCompare(base, next, query) {
  $("#cmptitle").innerHTML = `Compare <a href="#/run/${encodeURIComponent(next)}">${esc(next)}</a> (new) with <a href="#/run/${encodeURIComponent(base)}">${esc(base)}</a> (base)`;
  $("#cmpmd").onclick = async () => {
    const md = await api(`/compare?base=${encodeURIComponent(base)}&new=${encodeURIComponent(next)}&format=md${query ? "&" + query : ""}`);
    try { await navigator.clipboard.writeText(md); } catch (e) { /* no clipboard permission */ }
    window.lastCopied = md;
    $("#cmpmd").textContent = "copied";
    setTimeout(() => ($("#cmpmd").textContent = "copy as Markdown (pull-request comment)"), 1500);
  };
  $("#cmperr").textContent = "";
  $("#cmpverdict").textContent = "";
  $("#cmpverdict").className = "verdict";
  const tb = $("#cmprows tbody");
  tb.innerHTML = "";
  let rep;
  try {
    rep = await api(`/compare?base=${encodeURIComponent(base)}&new=${encodeURIComponent(next)}${query ? "&" + query : ""}`);
  } catch (e) { $("#cmperr").textContent = e.message; return; }
  const v = $("#cmpverdict");
  const undecided = !rep.regressions && rep.inconclusive > 0;
  v.className = "verdict " + (rep.regressions ? "bad" : undecided ? "" : "good");
  v.textContent = `${rep.regressions ? "Regression" : undecided ? "Inconclusive" : "No regression"}: ${rep.regressions} regressed, ${rep.improvements} improved, ${rep.unchanged} unchanged, ${rep.inconclusive} inconclusive, ${rep.untestable} untestable · ${rep.tests} tests, alpha ${rep.alpha} (${rep.correction}), threshold ${fmtNum(100 * rep.threshold)}%`;
  for (const r of rep.rows) {
    const tr = document.createElement("tr");
    tr.className = r.verdict;
    tr.innerHTML = `<td>${esc(r.cell)}</td><td>${esc(r.metric.name)}</td><td class="num">${valFmt(r.base, r.metric.unit)}</td><td class="num">${valFmt(r.new, r.metric.unit)}</td>
      <td class="num">${r.effect == null ? "–" : (r.effect > 0 ? "+" : "") + fmtNum(100 * r.effect) + "%"}</td><td class="num">${r.mde == null ? "–" : fmtNum(100 * r.mde) + "%"}</td><td class="num">${pFmt(r.p)}</td><td class="num">${pFmt(r.p_adjusted)}</td>
      <td class="verdict">${esc(r.verdict)}${r.reason ? `: ${esc(r.reason)}` : ""}</td>`;
    tb.appendChild(tr);
  }
}
