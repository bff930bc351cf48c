"use strict";
// The schedules pages: the list (next run, last result, pause/resume,
// edit, delete), the add/edit form, and one schedule's history with the
// trend of its runs. Uses api, $, esc, showSection and loadChart of app.js
// and when of bench.js.

// scheduleRoute shows the page of a schedules hash (#/schedules,
// #/schedule/ID); false for other hashes.
function scheduleRoute() {
  const h = location.hash;
  let m;
  if (h === "#/schedules") { showSection("schedules"); loadSchedules(); return true; }
  if ((m = h.match(/^#\/schedule\/([^/]+)$/))) { showSection("schedule"); showSchedule(decodeURIComponent(m[1])); return true; }
  return false;
}

// scheduleEvent refreshes the open schedules page on a firing or a job's end.
function scheduleEvent(e) {
  if (!$("#schedules").hidden) loadSchedules();
  if (!$("#schedule").hidden && currentSchedule && (e.schedule === currentSchedule || e.state !== "running")) showSchedule(currentSchedule);
}

// whatOf says what a schedule runs.
const whatOf = (s) => `${s.kind === "bench" ? `${esc(s.tier || "custom")} benchmark` : "search"} of <span title="${esc(s.model)}">${esc((s.model || "").split("/").pop())}</span>`;

// gateText is the gate's verdicts on a job's runs, short.
const gateText = (gates) => (gates || []).map((g) => `<span class="gate-${esc(g.verdict)}" title="${esc(g.summary)}">${esc(g.verdict === "none" ? "no baseline" : g.verdict)}</span>`).join(" ");

function lastText(l) {
  if (!l) return "–";
  return `<span class="state-${esc(l.state)}">${esc(l.job)} ${esc(l.state)}</span> ${gateText(l.gates)}${l.error ? ` <small>${esc(l.error)}</small>` : ""}`;
}

let schedules = [];
async function loadSchedules() {
  schedules = await api("/schedules");
  const tb = $("#schedlist tbody");
  tb.innerHTML = "";
  for (const s of schedules) {
    const tr = document.createElement("tr");
    tr.dataset.schedule = s.id;
    tr.className = s.paused ? "paused" : "";
    tr.innerHTML = `<td><a href="#/schedule/${encodeURIComponent(s.id)}">${esc(s.name)}</a></td><td><code>${esc(s.cron)}</code></td><td>${whatOf(s)}</td>
      <td class="next">${s.paused ? "paused" : esc(when(s.next_fire))}</td><td class="last">${lastText(s.last_result)}</td>
      <td><button class="small edit">edit</button> <button class="small pause">${s.paused ? "resume" : "pause"}</button> <button class="small delete">delete</button></td>`;
    $(".edit", tr).onclick = () => editSchedule(s);
    $(".pause", tr).onclick = () => api(`/schedules/${encodeURIComponent(s.id)}`, { method: "PATCH", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ paused: !s.paused }) }).then(loadSchedules, alert);
    $(".delete", tr).onclick = () => confirm(`Delete schedule ${s.name}? Its jobs and runs stay.`) && api(`/schedules/${encodeURIComponent(s.id)}`, { method: "DELETE" }).then(loadSchedules, alert);
    tb.appendChild(tr);
  }
}

// The form: tier and config for a benchmark, workload and trials for a
// search.
function schedFormFields() {
  const f = $("#schedform");
  const bench = f.kind.value === "bench";
  f.querySelectorAll(".for-bench").forEach((el) => (el.hidden = !bench));
  f.querySelectorAll(".for-search").forEach((el) => (el.hidden = bench));
}
$("#schedform").kind.addEventListener("change", schedFormFields);
schedFormFields();
$("#schedtz").textContent = "times in the server's time zone unless the expression starts with CRON_TZ=Zone";

// editSchedule fills the form with a schedule; saving replaces it (PUT).
function editSchedule(s) {
  const f = $("#schedform"), j = s.job || {};
  f.id.value = s.id;
  f.name.value = s.name;
  f.cron.value = s.cron;
  f.kind.value = s.kind;
  for (const k of ["tier", "model", "gpu", "engine", "config", "workload", "trials"]) if (j[k] != null && f[k]) f[k].value = j[k];
  f.threshold.value = (s.gate && s.gate.threshold) || "5%";
  f.catch_up.checked = s.catch_up;
  $("#schedformtitle").textContent = `Edit schedule ${s.name}`;
  $("#savesched").textContent = "Save schedule";
  $("#cancelsched").hidden = false;
  schedFormFields();
}
function resetSchedForm() {
  const f = $("#schedform");
  f.reset();
  f.id.value = "";
  $("#schedformtitle").textContent = "Add a schedule";
  $("#savesched").textContent = "Add schedule";
  $("#cancelsched").hidden = true;
  schedFormFields();
}
$("#cancelsched").addEventListener("click", resetSchedForm);

$("#schedform").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const body = { name: f.get("name"), cron: f.get("cron"), catch_up: f.get("catch_up") === "on", kind: f.get("kind"), model: f.get("model"), engine: f.get("engine") };
  if (f.get("gpu")) body.gpu = f.get("gpu");
  if (body.kind === "bench") {
    body.tier = f.get("tier");
    body.config = f.get("config") || "default";
    if (f.get("threshold")) body.gate = { threshold: f.get("threshold") };
  } else {
    body.workload = f.get("workload");
    body.trials = +f.get("trials");
  }
  const id = f.get("id");
  $("#schederr").textContent = "";
  try {
    await api(id ? `/schedules/${encodeURIComponent(id)}` : "/schedules", { method: id ? "PUT" : "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    resetSchedForm();
    loadSchedules();
  } catch (e) { $("#schederr").textContent = e.message; }
});

// ---- one schedule: its firings and the trend of its runs
let currentSchedule = "";
async function showSchedule(id) {
  currentSchedule = id;
  const h = await api(`/schedules/${encodeURIComponent(id)}/runs`);
  const s = h.schedule;
  $("#schedtitle").innerHTML = `Schedule ${esc(s.name)}: <code>${esc(s.cron)}</code> · ${whatOf(s)} · ${s.paused ? "paused" : "next run " + esc(when(s.next_fire))}`;
  const tb = $("#schedruns tbody");
  tb.innerHTML = "";
  for (const r of h.runs.slice().reverse()) {
    const tr = document.createElement("tr");
    tr.className = "outcome-" + r.outcome;
    tr.innerHTML = `<td class="num">${r.seq}</td><td>${esc(when(r.slot))}</td><td>${esc(when(r.time))}${r.catch_up ? " <b>catch-up</b>" : ""}</td>
      <td>${esc(r.outcome)}${r.reason ? ` <small>${esc(r.reason)}</small>` : ""}</td>
      <td>${r.job ? `${esc(r.job)} <span class="state-${esc(r.job_state)}">${esc(r.job_state || "")}</span>${r.job_error ? ` <small>${esc(r.job_error)}</small>` : ""}` : "–"}</td>
      <td>${r.study ? `<a href="#/study/${encodeURIComponent(r.study)}">study</a>` : ""}${(r.runs || []).map((x) => `<a href="#/run/${encodeURIComponent(x)}">${esc(x)}</a>`).join(" ")}</td>
      <td>${gateText(r.gates)}</td>`;
    tb.appendChild(tr);
  }
  const trend = $("#trend");
  if (s.kind !== "bench") {
    trend.hidden = true;
    $("#trendmsg").hidden = false;
    $("#trendmsg").textContent = "A search schedule's runs are its jobs' studies (linked above); the trend is drawn for benchmark schedules.";
    return;
  }
  await loadChart(trend, `/schedules/${encodeURIComponent(id)}/charts/trend`, $("#trendmsg"));
}
