"use strict";
// The dashboard: plain DOM over the JSON API and its Server-Sent Events.
const $ = (s, el = document) => el.querySelector(s);
const tokenInput = $("#token");
tokenInput.value = localStorage.getItem("tuner-token") || "";
// A new token: reload, so that the event stream and the chart use it.
tokenInput.addEventListener("change", () => { localStorage.setItem("tuner-token", tokenInput.value); location.reload(); });

async function api(path, opts = {}) {
  const headers = Object.assign({}, opts.headers || {});
  if (tokenInput.value) headers.Authorization = "Bearer " + tokenInput.value;
  const r = await fetch("/api/v1" + path, Object.assign({}, opts, { headers }));
  if (r.status === 401) {
    // The server was started with a token: say so, once, above every page.
    $("#authneeded").hidden = false;
    throw new Error("This server needs an API token");
  }
  const text = await r.text();
  let body = text;
  try { body = JSON.parse(text); } catch (e) { /* text formats */ }
  if (!r.ok && !(r.status === 422 && body && body.closest)) throw new Error((body && body.message) || r.statusText);
  return body;
}

// Readable numbers with units.
const fmtNum = (v, d = 1) => v == null || isNaN(v) ? "–" : Number(v).toLocaleString(undefined, { maximumFractionDigits: d, minimumFractionDigits: d });
const unit = (metric) => /throughput/.test(metric) ? "tok/s" : "ms";
function fmtDur(s) {
  if (s == null || s < 0) return "–";
  s = Math.round(s);
  const h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, x = s % 60;
  return h ? `${h}h${String(m).padStart(2, "0")}m` : m ? `${m}m${String(x).padStart(2, "0")}s` : `${x}s`;
}
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));

// ---- home: jobs with live progress, studies, the queue form
const progress = {}; // job id -> latest event
async function loadJobs() {
  const jobs = await api("/jobs");
  const tb = $("#jobs tbody");
  tb.innerHTML = "";
  for (const j of jobs.slice().reverse()) {
    const e = progress[j.id] || {};
    const state = e.state && j.state === "running" ? e.state : j.state;
    const pct = e.total ? Math.min(100, 100 * e.done / e.total) : 0;
    const tr = document.createElement("tr");
    tr.dataset.job = j.id;
    tr.innerHTML = `<td>${esc(j.id)}</td><td class="state-${esc(state)}">${esc(state)}</td>
      <td class="progress">${e.total !== undefined ? `<span class="bar"><span style="width:${pct}%"></span></span>${e.phase === "repeat" ? "re-measurement" : e.phase === "bench" ? "level" : "trial"} ${e.done}/${e.total || "?"} · ${fmtDur(e.elapsed_s)} elapsed · ETA ${fmtDur(e.eta_s)}` : ""}</td>
      <td class="num">${e.best != null ? fmtNum(e.best) + " " + unit(e.best_unit) : "–"}</td>
      <td class="num">${e.front ?? "–"}</td><td>${esc(e.last || e.running || j.error || "")}</td>
      <td>${j.study ? `<a href="#/study/${encodeURIComponent(j.study)}">study</a>` : ""}${(j.bench_runs || []).map((r) => `<a href="#/run/${encodeURIComponent(r)}">run ${esc(r)}</a>`).join(" ")}
          ${j.state === "queued" || j.state === "running" ? `<button class="small cancel">cancel</button>` : ""}</td>`;
    const c = $(".cancel", tr);
    if (c) c.onclick = () => api(`/jobs/${j.id}/cancel`, { method: "POST" }).then(loadJobs, alert);
    tb.appendChild(tr);
  }
}
async function loadStudies() {
  const studies = await api("/studies");
  const tb = $("#studies tbody");
  tb.innerHTML = "";
  for (const s of studies) {
    const k = s.key || {};
    const tr = document.createElement("tr");
    tr.innerHTML = `<td><a href="#/study/${encodeURIComponent(s.id)}">${esc(s.id)}</a></td><td>${esc(k.served_model || k.model)}</td>
      <td>${esc(k.gpu_count)}× ${esc(k.gpu)}</td><td>${esc(k.engine)}</td><td>${esc(k.workload)}</td><td>${esc(k.slo || "–")}</td>
      <td>${esc((s.created || "").replace("T", " ").slice(0, 16))}</td>`;
    tb.appendChild(tr);
  }
}

$("#jobform").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const spec = { model: f.get("model"), gpu: f.get("gpu"), gpus: +f.get("gpus"), engine: f.get("engine"), workload: f.get("workload"),
    trials: +f.get("trials"), seed: +f.get("seed"), resume: f.get("resume") === "on" };
  if (f.get("requests")) spec.requests = +f.get("requests");
  if (f.get("slo")) spec.slo = f.get("slo");
  if (f.get("budget")) spec.budget = f.get("budget");
  $("#formerr").textContent = "";
  try {
    await api("/jobs", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(spec) });
    loadJobs();
  } catch (e) { $("#formerr").textContent = e.message; }
});

let refreshTimer = null;
// onEvent calls fn with each "progress" event's data. EventSource cannot
// send the bearer token, so with a token the stream is read with fetch and
// its "event:"/"data:" lines split here (a few lines: the server sends one
// data line per event); reconnects after a second either way.
function onEvent(fn) {
  if (!tokenInput.value) {
    new EventSource("/api/v1/events").addEventListener("progress", (m) => fn(m.data));
    return;
  }
  (async () => {
    for (;;) {
      try {
        const r = await fetch("/api/v1/events", { headers: { Authorization: "Bearer " + tokenInput.value } });
        if (!r.ok) throw new Error(r.statusText);
        const rd = r.body.getReader(), dec = new TextDecoder();
        let buf = "", ev = "", data = "";
        for (;;) {
          const { value, done } = await rd.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf("\n")) >= 0) {
            const line = buf.slice(0, i).replace(/\r$/, "");
            buf = buf.slice(i + 1);
            if (line === "") { if (ev === "progress" && data) fn(data); ev = ""; data = ""; }
            else if (line.startsWith("event:")) ev = line.slice(6).trim();
            else if (line.startsWith("data:")) data += line.slice(5).replace(/^ /, "");
          }
        }
      } catch (e) { /* the service restarted or the token changed: retry */ }
      await new Promise((res) => setTimeout(res, 1000));
    }
  })();
}
function listen() {
  onEvent((raw) => {
    const e = JSON.parse(raw);
    // A state-only event (queued, study chosen, done) keeps the last
    // progress figures.
    const upd = e.phase ? e : { state: e.state, study: e.study, error: e.error };
    progress[e.job] = Object.assign(progress[e.job] || {}, upd);
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(() => { loadJobs(); if (e.state !== "running") loadStudies(); benchEvent(e); scheduleEvent(e); }, 100);
  });
}

// ---- study page
// The trials table is paged and sorted by the server (a study can hold
// thousands of trials).
const pageSize = 100;
let studyID = "", trialRows = [], sortKey = "seq", sortDir = "asc", offset = 0, total = 0, metrics = {};
async function loadTrials() {
  const page = await api(`/studies/${encodeURIComponent(studyID)}/trials?sort=${sortKey}&order=${sortDir}&offset=${offset}&limit=${pageSize}`);
  trialRows = page.trials;
  total = page.total;
  renderTrials();
}
function renderTrials() {
  const tb = $("#trials tbody");
  tb.innerHTML = "";
  for (const t of trialRows) {
    const tr = document.createElement("tr");
    tr.innerHTML = `<td class="num">${t.seq}</td><td class="state-${esc(t.state)}">${esc(t.verdict)}</td><td>${esc(t.config_id)}</td>
      <td class="num">${fmtNum(t.throughput)} ${t.throughput != null ? "tok/s" : ""}</td><td class="num">${fmtNum(t.latency, 2)} ${t.latency != null ? "ms" : ""}</td>
      <td class="num">${fmtNum(t.vram_gib)} ${t.vram_gib != null ? "GiB" : ""}</td><td class="num">${fmtDur(t.duration_s)}</td>
      <td class="flags">${esc((t.flags || []).join(" ") || "(vLLM default)")}</td>
      <td><a href="#/trial/${encodeURIComponent(t.id)}">details</a></td>`;
    tb.appendChild(tr);
  }
  $("#pageinfo").textContent = total ? `trials ${offset + 1}–${offset + trialRows.length} of ${total}` : "no trials";
  $("#prev").disabled = offset === 0;
  $("#next").disabled = offset + trialRows.length >= total;
}
document.querySelectorAll("#trials th[data-k]").forEach((th) => th.addEventListener("click", () => {
  sortDir = sortKey === th.dataset.k ? (sortDir === "asc" ? "desc" : "asc") : (th.dataset.k === "throughput" ? "desc" : "asc");
  sortKey = th.dataset.k;
  offset = 0;
  loadTrials().catch(alert);
}));
$("#prev").onclick = () => { offset = Math.max(0, offset - pageSize); loadTrials().catch(alert); };
$("#next").onclick = () => { offset += pageSize; loadTrials().catch(alert); };

function copyButton(label, text) {
  const b = document.createElement("button");
  b.className = "small copy";
  b.textContent = label;
  b.onclick = async () => {
    try { await navigator.clipboard.writeText(text); } catch (e) { /* no clipboard permission: the text is selectable */ }
    window.lastCopied = text;
    b.textContent = "copied";
    setTimeout(() => (b.textContent = label), 1500);
  };
  return b;
}

// showSection shows one page of the dashboard and marks its tab.
function showSection(id) {
  document.querySelectorAll("main > section").forEach((s) => (s.hidden = s.id !== id));
  const bench = ["bench", "run", "compare"].includes(id), sched = ["schedules", "schedule"].includes(id);
  $("#nav-bench").classList.toggle("active", bench);
  $("#nav-sched").classList.toggle("active", sched);
  $("#nav-search").classList.toggle("active", !bench && !sched);
}

async function showStudy(id) {
  showSection("study");
  const st = await api(`/studies/${encodeURIComponent(id)}`);
  const k = st.key || {};
  $("#studytitle").textContent = `${k.served_model || k.model} on ${k.gpu_count}× ${k.gpu} · engine ${k.engine} · workload ${k.workload} · SLO ${k.slo || "none"}`;
  const front = await api(`/studies/${encodeURIComponent(id)}/front`);
  metrics = front.metrics;
  const byLabel = {};
  for (const c of front.front) byLabel["config " + c.config_id] = c;
  const fr = $("#front");
  fr.onload = () => hookChart(fr, byLabel);
  const sid = encodeURIComponent(id);
  $("#impmethod").textContent = "(permutation importance on the search's surrogate: gradient-boosted trees trained on this study's trials)";
  // The charts arrive as they are drawn; the tables do not wait for them.
  const charts = Promise.all([loadChart(fr, `/studies/${sid}/charts/front`),
    loadChart($("#progress"), `/studies/${sid}/charts/progress`),
    loadChart($("#importance"), `/studies/${sid}/charts/importance`, $("#impmsg")),
    loadChart($("#parallel"), `/studies/${sid}/charts/parallel`)]);
  charts.catch(() => {});
  fr.dataset.frontSize = front.front.length;
  studyID = id;
  offset = 0;
  await loadTrials();
  const rec = $("#rec");
  rec.innerHTML = "";
  try {
    const r = await api(`/studies/${encodeURIComponent(id)}/recommend`);
    if (!r.feasible) {
      rec.innerHTML = `<p class="err">No config meets the SLO${r.closest ? `; closest: config ${esc(r.closest.config_id)} (${esc((r.closest.violations || []).join(", "))})` : ""}.</p>`;
      return;
    }
    const c = r.candidate;
    // The verdict is the API's own sentence (tuner.Judge): the CLI's
    // search summary and recommend print the same words.
    rec.innerHTML = `<p><b>config ${esc(c.config_id)}</b>${r.is_default ? " (vLLM's default)" : ""}:
      ${fmtNum(c.throughput.median)} tok/s median over ${c.throughput.n} runs, ${esc(metrics.latency)} ${fmtNum(c.latency.median, 2)} ms,
      peak VRAM ${fmtNum(c.vram_gib.median)} GiB${c.vram_estimated ? " (estimated)" : ""}</p>
      <p id="verdict">verdict: ${esc(r.verdict)}</p><h4>vllm serve command</h4>`;
    const pre = document.createElement("pre"); pre.id = "reccmd"; pre.textContent = r.command; rec.appendChild(pre);
    rec.appendChild(copyButton("copy command", r.command));
    if (r.yaml) {
      const h = document.createElement("h4"); h.textContent = "--config YAML"; rec.appendChild(h);
      const y = document.createElement("pre"); y.textContent = r.yaml; rec.appendChild(y);
      rec.appendChild(copyButton("copy YAML", r.yaml));
    }
  } catch (e) { rec.innerHTML = `<p class="err">${esc(e.message)}</p>`; }
}

// loadChart shows a chart page of the API in a frame: fetched with the
// token (a frame's own request cannot carry it) and shown in place
// (ECharts is inlined, same origin). A chart that cannot be drawn shows
// the server's reason in msg instead.
async function loadChart(frame, path, msg) {
  const headers = tokenInput.value ? { Authorization: "Bearer " + tokenInput.value } : {};
  const r = await fetch("/api/v1" + path, { headers });
  const text = await r.text();
  if (r.status === 401) { $("#authneeded").hidden = false; return; }
  if (!r.ok) {
    let m = text;
    try { m = JSON.parse(text).message; } catch (e) { /* plain text */ }
    frame.hidden = true;
    if (msg) { msg.hidden = false; msg.textContent = m; }
    return;
  }
  if (msg) msg.hidden = true;
  frame.hidden = false;
  frame.srcdoc = text;
}

// ---- trial page
async function showTrial(id) {
  showSection("trial");
  const t = await api(`/trials/${encodeURIComponent(id)}`);
  const r = t.result || {};
  $("#trialback").href = `#/study/${encodeURIComponent(t.study_id)}`;
  $("#trialtitle").textContent = `trial ${t.seq} of study ${t.study_id} · config ${t.config_id}`;
  const gpu = r.gpu || {};
  const stab = r.stability || {};
  const rows = [["State", `<span class="state-${esc(t.state)}">${esc(t.state)}</span>${r.failure ? " (" + esc(r.failure) + ")" : ""}${r.error ? ": " + esc(r.error) : ""}`],
    ["Flags", `<span class="flags">${esc((t.flags || []).join(" ") || "(vLLM default)")}</span>`],
    ["GPU", esc(`${gpu.count || 1}× ${gpu.name || "?"}${gpu.driver ? ", driver " + gpu.driver : ""}`)],
    ["Peak VRAM", r.peak_vram_gib != null ? `${fmtNum(r.peak_vram_gib)} GiB (${esc(r.vram_source || "?")})` : "–"],
    ["Stability", stab.stable ? "steady state reached" : `not steady${stab.reason ? ": " + esc(stab.reason) : ""}`],
    ["Engine", esc(r.engine_version || "–")],
    ["Duration", fmtDur(r.phases && r.phases.total_s)]];
  $("#trialmeta tbody").innerHTML = rows.map(([k, v]) => `<tr><td>${k}</td><td>${v}</td></tr>`).join("");
  const raw = $("#trialraw");
  raw.hidden = !r.raw_path;
  raw.href = `/api/v1/trials/${encodeURIComponent(id)}/raw`;
  $("#trialrecord").href = "data:application/json;charset=utf-8," + encodeURIComponent(JSON.stringify(t, null, 2));
  $("#trialrecord").setAttribute("download", `${t.id}.json`);
  const lv = $("#triallevels tbody");
  lv.innerHTML = "";
  (r.levels || []).forEach((l, i) => {
    const m = l.metrics || {}, s = l.stability || {};
    const tr = document.createElement("tr");
    tr.innerHTML = `<td>${l.concurrency ? "c=" + l.concurrency : fmtNum(l.rate, 2) + " req/s"}${i === r.primary ? " <b>(primary)</b>" : ""}</td>
      <td class="num">${fmtNum(m.output_throughput)} tok/s</td><td class="num">${fmtNum((m.ttft_ms || {}).p99, 2)} ms</td>
      <td class="num">${fmtNum((m.tpot_ms || {}).p99, 2)} ms</td><td class="num">${fmtNum((m.e2el_ms || {}).p99, 2)} ms</td>
      <td class="num">${m.completed ?? "–"}</td>
      <td class="${s.stable ? "state-ok" : "state-failed"}">${s.stable ? "stable" : "unstable"} <small>CV ${fmtNum(100 * (s.throughput_cv || 0), 1)}%, ${s.windows || 0} windows${s.reason ? ", " + esc(s.reason) : ""}</small></td>
      <td class="${l.slo_met ? "state-ok" : "state-failed"}">${l.slo_met ? "met" : "missed " + esc((l.violations || []).join(", "))}</td>`;
    lv.appendChild(tr);
  });
  await loadChart($("#breakdown"), `/trials/${encodeURIComponent(id)}/charts/breakdown`, $("#bdmsg"));
  const log = $("#triallog");
  try { log.textContent = await api(`/trials/${encodeURIComponent(id)}/log`); } catch (e) { log.textContent = e.message; }
}

// hookChart shows a clicked point's flags under the chart (the chart is the
// go-echarts page of `tuner pareto --html`, same origin).
function hookChart(fr, byLabel) {
  const w = fr.contentWindow;
  if (!w || !w.echarts) return;
  const el = w.document.querySelector("[_echarts_instance_]") || w.document.querySelector("div.container div");
  const chart = el && w.echarts.getInstanceByDom(el);
  if (!chart) return;
  chart.on("click", async (p) => {
    const name = (p.data && (p.data.name || (Array.isArray(p.data.value) ? p.data.value[3] : ""))) || p.name || "";
    const box = $("#pointflags");
    box.hidden = false;
    box.textContent = name;
    const m = name.match(/[0-9a-f]{12}/);
    if (!m) return;
    // The point's config may be on another page of the table: ask for it.
    const page = await api(`/studies/${encodeURIComponent(studyID)}/trials?config=${m[0]}&limit=1`);
    const t = page.trials[0];
    if (t) box.textContent = `config ${t.config_id}: ${(t.flags || []).join(" ") || "(vLLM default)"}`;
  });
}
function route() {
  const m = location.hash.match(/^#\/study\/(.+)$/);
  if (m) return showStudy(decodeURIComponent(m[1])).catch(() => {});
  const tm = location.hash.match(/^#\/trial\/(.+)$/);
  if (tm) return showTrial(decodeURIComponent(tm[1])).catch(() => {});
  if (benchRoute() || scheduleRoute()) return;
  showSection("home");
  // A 401 shows the token notice (api); nothing else to do here.
  loadJobs().catch(() => {});
  loadStudies().catch(() => {});
}
window.addEventListener("hashchange", route);
listen();
// bench.js and schedules.js (loaded after this file) add their pages first.
document.addEventListener("DOMContentLoaded", route);
