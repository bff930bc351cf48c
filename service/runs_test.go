package service

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

// testMatrix is one small closed-loop cell: a few seconds on the
// in-process simulator.
const testMatrix = `name: api-test
defaults: {seed: 1, warmup: 4, slo: "ttft_p99<=5s,tpot_p99<=200ms"}
cells:
  - {name: chat-c4, prompt: {kind: fixed, value: 128}, output: {kind: fixed, value: 16}, arrival: {kind: closed, concurrency: 4}, num_requests: %d}
`

// benchJob is a sim-virtual benchmark of vLLM's default config over
// testMatrix with n requests, extra fields appended.
func benchJob(n int, extra string) string {
	m, _ := json.Marshal(fmt.Sprintf(testMatrix, n))
	return fmt.Sprintf(`{"kind":"bench","engine":"sim-virtual","model":%q,"gpu":%q,"config":"default","matrix_yaml":%s%s}`, testModel, testGPU, m, extra)
}

// runBench queues a bench job and waits until it is done; it returns the
// job and the events it sent.
func runBench(t *testing.T, e *env, ch <-chan Event, body string) (store.Job, []Event) {
	t.Helper()
	j := postJob(t, e, body)
	if j.Kind != KindBench {
		t.Fatalf("posted job kind %q", j.Kind)
	}
	seen := waitState(t, ch, j.ID, store.JobDone)
	got, err := e.st.Job(context.Background(), j.ID)
	if err != nil || len(got.BenchRuns) != 1 {
		t.Fatalf("job %+v %v; want one run", got, err)
	}
	return got, seen
}

// TestBenchJobsRunsAndCompare queues two sim-virtual benchmarks over the
// API (the second on a 40% slower simulator), follows their progress over
// SSE, reads the runs, their report, raw data and plot, and compares them
// with the regression gate: TPOT regresses.
func TestBenchJobsRunsAndCompare(t *testing.T) {
	e := newEnv(t, "", Config{}, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := e.events(t, ctx)
	ja, seen := runBench(t, e, ch, benchJob(60, `,"labels":["git=a"]`))
	var sawLevel, sawStored bool
	for _, ev := range seen {
		sawLevel = sawLevel || (ev.Phase == "bench" && ev.Total == 1 && ev.Run == ja.BenchRuns[0] && strings.HasPrefix(ev.Line, "bench 1/1  cell chat-c4  load 4 concurrent"))
		sawStored = sawStored || (ev.Done == 1 && strings.HasPrefix(ev.Line, "run "+ja.BenchRuns[0]+" stored: ok, 1 of 1 cells"))
	}
	if !sawLevel || !sawStored {
		t.Fatalf("no level n/N or stored-run progress in %+v", seen)
	}
	jb, _ := runBench(t, e, ch, benchJob(60, `,"labels":["git=b"],"tier":"smoke","engine_args":["--slowdown=1.4"]`))
	ra, rb := ja.BenchRuns[0], jb.BenchRuns[0]

	// The list and its filters.
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{ra, rb}},
		{"?model=" + testModel, []string{ra, rb}},
		{"?model=other", nil},
		{"?label=git=b", []string{rb}},
		{"?label=git", []string{ra, rb}},
		{"?tier=smoke", []string{rb}},
	} {
		code, out := e.do(t, "GET", "/api/v1/runs"+tc.query, "", "")
		var rows []runRow
		if code != 200 || json.Unmarshal([]byte(out), &rows) != nil {
			t.Fatalf("runs%s: %d %s", tc.query, code, out)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
			if r.Engine != tuner.EngineSimVirtual || r.Model != testModel || r.State != store.RunOK || len(r.Cells) != 1 || !r.Raw {
				t.Fatalf("run row %+v", r)
			}
			wantRequests(t, e, r, 60)
		}
		if fmt.Sprint(ids) != fmt.Sprint(tc.want) {
			t.Fatalf("runs%s: %v; want %v", tc.query, ids, tc.want)
		}
	}

	// The report: the stored record, and Markdown as bench show --md.
	code, out := e.do(t, "GET", "/api/v1/runs/"+rb, "", "")
	var run store.Run
	if code != 200 || json.Unmarshal([]byte(out), &run) != nil || run.Tier != "smoke" || run.Labels["git"] != "b" || len(run.Cells) != 1 || run.Cells[0].Levels[0].Metrics.TPOT.Median <= 0 {
		t.Fatalf("run: %d %s", code, out)
	}
	code, out = e.do(t, "GET", "/api/v1/runs/"+rb+"?format=md", "", "")
	if code != 200 || !strings.Contains(out, "chat-c4") || !strings.Contains(out, "|") {
		t.Fatalf("run md: %d %s", code, out)
	}

	// Raw data: one CSV row per request, as bench export writes it.
	runA, err := e.st.Run(context.Background(), ra)
	if err != nil {
		t.Fatal(err)
	}
	code, out = e.do(t, "GET", "/api/v1/runs/"+ra+"/raw", "", "")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != 200 || err != nil || len(recs) != 1+runA.Cells[0].Requests || recs[0][0] != "run" || recs[1][0] != ra {
		t.Fatalf("raw: %d, %d rows (%v); want %d", code, len(recs), err, 1+runA.Cells[0].Requests)
	}
	code, out = e.do(t, "GET", "/api/v1/runs/"+ra+"/plot?metric=tpot_p50", "", "")
	if code != 200 || !strings.Contains(out, "<svg") {
		t.Fatalf("plot: %d %.200s", code, out)
	}

	// The gate: NEW is 40% slower per step, so TPOT regresses.
	code, out = e.do(t, "GET", "/api/v1/compare?base="+ra+"&new="+rb+"&metrics=tpot_p50,e2el_p50", "", "")
	var rep compareDoc
	if code != 200 || json.Unmarshal([]byte(out), &rep) != nil || rep.Base != ra || rep.New != rb {
		t.Fatalf("compare: %d %s", code, out)
	}
	regressed := false
	for _, r := range rep.Rows {
		regressed = regressed || (r.Metric.Name == "tpot_p50" && r.Verdict == gate.Regression && r.Effect != nil && *r.Effect > 0.2)
	}
	if !regressed {
		t.Fatalf("no TPOT regression in %s", out)
	}
	code, out = e.do(t, "GET", "/api/v1/compare?base=latest:git=a&new=latest:git=b&format=md", "", "")
	if code != 200 || !strings.Contains(out, "Regression") || !strings.Contains(out, "tpot_p50") {
		t.Fatalf("compare md: %d %s", code, out)
	}

	// A run of another matrix cannot be judged against them: 422.
	jc, _ := runBench(t, e, ch, strings.Replace(benchJob(20, ""), "chat-c4", "other", 1))
	for _, tc := range []struct {
		query, code string
		status      int
		want        string
	}{
		{"base=" + ra + "&new=" + jc.BenchRuns[0], "incomparable", 422, "runs differ in matrix"},
		{"base=" + ra + "&new=" + ra, "invalid", 400, "same run"},
		{"base=" + ra + "&new=r99", "not_found", 404, "r99"},
		{"base=" + ra + "&new=" + rb + "&alpha=2", "invalid", 400, "--alpha 2: want a level in (0, 1)"},
		{"base=" + ra + "&new=" + rb + "&metrics=foo_p50", "invalid", 400, "--metrics"},
		{"new=" + rb, "invalid", 400, "compare needs base"},
		{"base=" + ra + "&new=" + rb + "&format=xml", "invalid", 400, "--format xml"},
	} {
		code, out := e.do(t, "GET", "/api/v1/compare?"+tc.query, "", "")
		var ae apiError
		if code != tc.status || json.Unmarshal([]byte(out), &ae) != nil || ae.Code != tc.code || !strings.Contains(ae.Message, tc.want) {
			t.Fatalf("compare?%s: %d %s; want %d %s %q", tc.query, code, out, tc.status, tc.code, tc.want)
		}
	}
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/api/v1/runs/r99", 404}, {"/api/v1/runs/x1/raw", 404}, {"/api/v1/runs/" + ra + "/plot?metric=tpot", 400},
		{"/api/v1/runs/" + ra + "?format=yaml", 400}, {"/api/v1/runs?label==x", 400},
	} {
		if code, out := e.do(t, "GET", tc.path, "", ""); code != tc.status {
			t.Fatalf("%s: %d %s; want %d", tc.path, code, out, tc.status)
		}
	}
}

// wantRequests checks a listed run's request count: the requests its
// stored cells issued, and at least the n its cell asked for, unless the
// level stopped early under the early-stop rule (a steady state whose
// throughput CI met the target, judged on the live clock: how often it
// happens depends on the machine), then at least the share of n the rule
// waits for.
func wantRequests(t *testing.T, e *env, r runRow, n int) {
	t.Helper()
	run, err := e.st.Run(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	issued := 0
	for _, c := range run.Cells {
		issued += c.Requests
		least := n
		for _, l := range c.Levels {
			if l.Stability.EarlyStopped {
				least = int(trial.DefaultStabilityConfig().EarlyStopMin * float64(n))
				if !l.Stability.Stable || l.Stability.CIHalfWidth > trial.DefaultStabilityConfig().CITarget {
					t.Fatalf("run %s cell %s stopped early without a steady state in its CI target: %+v", r.ID, c.Name, l.Stability)
				}
				t.Logf("run %s cell %s: %d requests, %s", r.ID, c.Name, c.Requests, l.Stability.Reason)
			}
		}
		if c.Requests < least {
			t.Fatalf("run %s cell %s: %d requests; want at least %d (%+v)", r.ID, c.Name, c.Requests, least, c.Levels[0].Stability)
		}
	}
	if r.Requests != issued {
		t.Fatalf("run row %s: %d requests; its cells issued %d", r.ID, r.Requests, issued)
	}
}

// compareDoc is the part of the gate's JSON report the tests read.
type compareDoc struct {
	Base, New   string
	Regressions int
	Rows        []struct {
		Cell    string
		Metric  struct{ Name string }
		Verdict gate.Verdict
		Effect  *float64
	}
}

// TestBenchJobValidationIsTheCLIs: a bench job body is checked by
// BenchSpec's code with `tuner bench run`'s messages; options naming
// server files or programs are refused.
func TestBenchJobValidationIsTheCLIs(t *testing.T) {
	e := newEnv(t, "", Config{}, false)
	base := `"kind":"bench","model":"` + testModel + `","gpu":"` + testGPU + `","tier":"smoke"`
	tests := []struct{ name, body, want string }{
		{"engine", `{` + base + `,"config":"default","engine":"tgi"}`, `--engine "tgi": want vllm, sim or sim-virtual`},
		{"no server", `{` + base + `}`, `bench run needs --config (start an engine) or --url (a running server)`},
		{"no matrix", `{"kind":"bench","config":"default","engine":"sim-virtual","gpu":"H100-80GB","model":"m"}`, `bench run needs --matrix FILE or --tier smoke|nightly|release`},
		{"tier", `{"kind":"bench","tier":"weekly","url":"http://127.0.0.1:1"}`, `--tier "weekly": want smoke, nightly or release`},
		{"release", `{"kind":"bench","tier":"release","url":"http://127.0.0.1:1"}`, `--tier release needs --models`},
		{"url and config", `{` + base + `,"config":"default","url":"http://127.0.0.1:1"}`, `--url and --config exclude each other`},
		{"url engine", `{` + base + `,"engine":"sim","url":"http://127.0.0.1:1"}`, `--url starts nothing`},
		{"bad url", `{` + base + `,"url":"ftp://x"}`, `want http://HOST:PORT`},
		{"label", `{` + base + `,"url":"http://127.0.0.1:1","labels":["git"]}`, `--label "git": want KEY=VALUE`},
		{"telemetry", `{` + base + `,"url":"http://127.0.0.1:1","telemetry":"gpu"}`, `--telemetry "gpu": want auto, nvml, engine or none`},
		{"no gpu", `{"kind":"bench","tier":"smoke","model":"m","config":"default","engine":"sim-virtual"}`, `--engine sim-virtual needs --gpu`},
		{"sim flag", `{` + base + `,"config":"default","engine":"sim-virtual","engine_args":["--no-such-flag"]}`, `--engine sim-virtual:`},
		{"port", `{` + base + `,"config":"default","engine":"sim-virtual","engine_args":["--port=1"]}`, `the tuner sets --host and --port`},
		{"unknown config", `{` + base + `,"config":"abc123","engine":"sim-virtual"}`, `--config abc123: not a file, a trial ID or a stored config ID`},
		{"config file", `{` + base + `,"config":"/etc/tuner.yaml","engine":"sim-virtual"}`, `only a trial ID, a stored config ID or "default"`},
		{"matrix file", `{"kind":"bench","matrix":"examples/matrix-smoke.yaml","url":"http://127.0.0.1:1"}`, `matrix names a file or program of the server`},
		{"vllm", `{` + base + `,"config":"default","vllm":"/bin/sh"}`, `vllm names a file or program of the server`},
		{"log dir", `{` + base + `,"config":"default","log_dir":"/tmp"}`, `log_dir names a file or program of the server`},
		{"matrix yaml", `{"kind":"bench","url":"http://127.0.0.1:1","matrix_yaml":"name: x\ncells:\n  - {name: a, prompt: {kind: fixed, value: -1}}\n"}`, `matrix_yaml:3`},
		{"sharegpt", `{"kind":"bench","url":"http://127.0.0.1:1","matrix_yaml":"name: x\ncells:\n  - {name: a, sharegpt: /etc/passwd, arrival: {kind: closed, concurrency: 1}, num_requests: 1}\n"}`, `names a ShareGPT file`},
		{"unknown field", `{` + base + `,"trials":3}`, `unknown field "trials"`},
		{"kind", `{"kind":"train"}`, `kind "train": want "search" or "bench"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { e.wantInvalidJob(t, tt.body, tt.want) })
	}
	// The same spec through the core gives the same message.
	spec := tuner.DefaultBenchSpec()
	spec.Tier, spec.Model, spec.GPU, spec.Config, spec.Engine = "smoke", testModel, testGPU, "default", "tgi"
	if err := spec.Validate(context.Background()); err == nil || err.Error() != `--engine "tgi": want vllm, sim or sim-virtual` {
		t.Fatalf("core: %v", err)
	}
	if js, _ := e.st.Jobs(context.Background()); len(js) != 0 {
		t.Fatalf("invalid jobs were queued: %+v", js)
	}
}

// TestStoppedBenchJobFails: a service stopped during a benchmark leaves
// the job running in the store and the run partial; the next service on
// the same file does not rerun it but fails the job, naming the run kept.
func TestStoppedBenchJobFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tuner.db")
	// Two cells: the first is stored, the service stops in the second.
	m, _ := json.Marshal(fmt.Sprintf(testMatrix, 20) + "  - {name: long, prompt: {kind: fixed, value: 128}, output: {kind: fixed, value: 16}, arrival: {kind: closed, concurrency: 2}, duration: 10m}\n")
	body := fmt.Sprintf(`{"kind":"bench","engine":"sim-virtual","model":%q,"gpu":%q,"config":"default","matrix_yaml":%s}`, testModel, testGPU, m)
	mid := runUntilStopped(t, path, body, func(ev Event) bool { return ev.Phase == "bench" && ev.Done == 1 })
	if mid.State != store.JobRunning || len(mid.BenchRuns) != 1 {
		t.Fatalf("after stop: %+v", mid)
	}
	e := newEnv(t, path, Config{}, false)
	ch := e.events(t, context.Background())
	e.run(t)
	seen := waitState(t, ch, mid.ID, store.JobFailed)
	want := "the service stopped during this benchmark; run " + mid.BenchRuns[0] + " kept its finished cells (partial): queue the job again"
	if last := seen[len(seen)-1]; last.Error != want {
		t.Fatalf("failed job error %q; want %q", last.Error, want)
	}
	run, err := e.st.Run(context.Background(), mid.BenchRuns[0])
	if err != nil || run.State != store.RunPartial || len(run.Cells) != 1 || run.Cells[0].Name != "chat-c4" {
		t.Fatalf("run after the stop: %+v %v", run, err)
	}
}

func FuzzParseBenchJob(f *testing.F) {
	f.Add(benchJob(20, ""))
	f.Add(benchJob(20, `,"labels":["git=a"],"tier":"smoke","engine_args":["--slowdown=1.05"]`))
	f.Add(`{"kind":"bench","url":"http://127.0.0.1:8000","tier":"smoke","request_timeout":"1m"}`)
	f.Add(`{"kind":"bench","tier":"release","models":["a","b"],"config":"default","engine":"sim-virtual","gpu":"H100-80GB"}`)
	f.Add(`{"kind":"bench","matrix_yaml":"name: x\ncells: []\n"}`)
	f.Add(`{"kind":"bench","startup_timeout":12}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, body string) {
		spec, err := ParseBenchJob(context.Background(), strings.NewReader(body), nil)
		if err != nil {
			var ue tuner.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %v is not a usage error (the API would answer 500)", err)
			}
			return
		}
		// An accepted spec round-trips through the queue unchanged.
		raw, err := json.Marshal(struct {
			Kind string `json:"kind"`
			tuner.BenchSpec
		}{KindBench, spec})
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseBenchJob(context.Background(), strings.NewReader(string(raw)), nil)
		if err != nil {
			t.Fatalf("stored spec %s rejected: %v", raw, err)
		}
		b1, _ := json.Marshal(spec)
		if b2, _ := json.Marshal(again); string(b1) != string(b2) {
			t.Fatalf("round trip changed the spec:\n%s\n%s", b1, b2)
		}
	})
}
