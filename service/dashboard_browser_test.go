package service

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/chart/charttest"
	"github.com/vllm-tuner/tuner/store"
)

// TestDashboardPagesInBrowser opens every dashboard page in headless
// Chromium at 1280 and 800 px, every request off the service blocked, and
// takes a screenshot of each: without a token the page says the server
// needs one; the study page shows the front, the optimisation history,
// parameter importance (its method named) and parallel coordinates, and
// the gain with its interval; the trial page shows flags, levels with
// their stability and verdict, the breakdown chart and the log's state.
// Every chart passes charttest.Check; no console error beyond the
// answers the pages expect (401 before the token, 404 for a trial that
// kept no engine log).
func TestDashboardPagesInBrowser(t *testing.T) {
	charttest.Find(t)
	const token = "s3cret-t0ken"
	e := newEnv(t, "", Config{Token: token}, true)
	code, out := e.do(t, "POST", "/api/v1/jobs", token, simJob(12))
	var j store.Job
	if code != 201 || json.Unmarshal([]byte(out), &j) != nil {
		t.Fatalf("POST job: %d %s", code, out)
	}
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) { // a hang guard
		_, out = e.do(t, "GET", "/api/v1/jobs/"+j.ID, token, "")
		if json.Unmarshal([]byte(out), &j) != nil || j.State == store.JobDone {
			break
		}
		if j.State == store.JobFailed || time.Now().After(deadline) {
			t.Fatalf("job %+v", j)
		}
	}
	dir := t.TempDir()
	shots := os.Getenv("TUNER_DASHBOARD_SHOTS")
	if shots == "" {
		shots = dir
	}
	b := charttest.New(t, dir, e.ts.URL)
	allow := func(status, path string) func(chromedp.ConsoleMessage) bool {
		return func(m chromedp.ConsoleMessage) bool {
			return m.Source == "network" && strings.Contains(m.Text, "status of "+status) && strings.Contains(m.URL, path)
		}
	}

	b.Open(e.ts.URL+"/", 1280, 800)
	b.Poll(`!document.querySelector('#authneeded').hidden`)
	if txt := charttest.Eval[string](b, `document.querySelector('#authneeded').innerText`); !strings.Contains(txt, "This server needs an API token") {
		t.Errorf("token state: %q", txt)
	}
	b.Screenshot(shots, "token-1280.png")
	if ce := b.ConsoleErrors(allow("401", "/api/v1/")); len(ce) > 0 {
		t.Errorf("token page: console errors %v", ce)
	}
	charttest.Eval[bool](b, `(localStorage.setItem("tuner-token", "`+token+`"), true)`)
	b.Open("about:blank", 1280, 800) // the next page loads afresh, reading the token

	trialID := store.TrialID(j.Study, 1)
	for _, width := range []int64{1280, 800} {
		w := "-" + map[int64]string{1280: "1280", 800: "800"}[width]
		b.Open("about:blank", width, 900)
		b.Open(e.ts.URL+"/#/study/"+j.Study, width, 900)
		b.Poll(`['front', 'progress', 'parallel'].every((id) => { const f = document.getElementById(id);
			const w = f.contentWindow; return !f.hidden && w && w.echarts && !!w.document.querySelector('[_echarts_instance_]'); }) &&
			(!document.querySelector('#impmsg').hidden || !!document.querySelector('#importance').contentWindow.echarts) && !!document.querySelector('#rec').innerText`)
		if m := charttest.Eval[string](b, `document.querySelector('#impmsg').hidden ? '' : document.querySelector('#impmsg').innerText`); m != "" {
			t.Errorf("no importance chart: %s", m)
		}
		b.Screenshot(shots, "study"+w+".png")
		charts := b.Inspect(chart.FrontName)
		if len(charts) != 4 {
			t.Fatalf("study page: %d charts, want 4", len(charts))
		}
		for _, in := range charts {
			charttest.Check(t, in)
			if in.Frame == "front" && (!strings.Contains(in.Tooltip, "config ") || !strings.Contains(in.Tooltip, "peak VRAM")) {
				t.Errorf("front hover text %q", in.Tooltip)
			}
		}
		if m := charttest.Eval[string](b, `document.querySelector('#impmethod').innerText`); !strings.Contains(m, "permutation importance") {
			t.Errorf("importance method %q", m)
		}
		if g := charttest.Eval[string](b, `document.querySelector('#rec').innerText`); !strings.Contains(g, "verdict: ") {
			t.Errorf("recommendation without its gain: %q", g)
		}
		if bl := b.Blocked(); len(bl) > 0 {
			t.Errorf("study page: requests off the server %v", bl)
		}
		if ce := b.ConsoleErrors(nil); len(ce) > 0 {
			t.Errorf("study page: console errors %v", ce)
		}

		b.Open("about:blank", width, 900)
		b.Open(e.ts.URL+"/#/trial/"+trialID, width, 900)
		b.Poll(`document.querySelectorAll('#triallevels tbody tr').length > 0 && document.querySelector('#triallog').textContent !== '' &&
			(!document.querySelector('#bdmsg').hidden || !!(document.querySelector('#breakdown').contentWindow.echarts))`)
		b.Screenshot(shots, "trial"+w+".png")
		for _, want := range []string{"State", "Flags", "GPU", "Peak VRAM", "Stability"} {
			if !strings.Contains(charttest.Eval[string](b, `document.querySelector('#trialmeta').innerText`), want) {
				t.Errorf("trial page lacks %s", want)
			}
		}
		if lv := charttest.Eval[string](b, `document.querySelector('#triallevels tbody').innerText`); !strings.Contains(lv, "stable") || !strings.Contains(lv, "tok/s") {
			t.Errorf("levels %q", lv)
		}
		for _, in := range b.Inspect("") {
			charttest.Check(t, in)
		}
		if bl := b.Blocked(); len(bl) > 0 {
			t.Errorf("trial page: requests off the server %v", bl)
		}
		if ce := b.ConsoleErrors(allow("404", "/log")); len(ce) > 0 {
			t.Errorf("trial page: console errors %v", ce)
		}
	}
}
