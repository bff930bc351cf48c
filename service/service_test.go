package service

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/tuner"
)

const (
	testModel = "meta-llama/Llama-3.1-8B-Instruct"
	testGPU   = "H100-80GB"
)

// simJob is a small sim-virtual search: 4 trials, 2 finalists re-measured
// once more.
func simJob(trials int) string {
	return fmt.Sprintf(`{"model":%q,"gpu":%q,"engine":"sim-virtual","trials":%d,"requests":40,"finalists":2,"repeats":2}`, testModel, testGPU, trials)
}

type env struct {
	st  *boltstore.Store
	srv *Server
	ts  *httptest.Server
}

// newEnv serves a Server over a real listener on a real bbolt file; run
// starts its job workers until the test ends.
func newEnv(t testing.TB, path string, cfg Config, run bool) *env {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "tuner.db")
	}
	st, err := boltstore.Open(context.Background(), path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = st
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	e := &env{st: st, srv: srv, ts: ts}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if run {
		go func() { defer close(done); srv.Run(ctx) }()
	} else {
		close(done)
	}
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		cancel()
		<-done
		st.Close()
	})
	return e
}

// run starts the server's job workers (for a test that subscribed to the
// events first) and waits for them to stop when the test ends: a job
// still writing after the test would race the removal of its temporary
// directory ("directory not empty").
func (e *env) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (e *env) do(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// events reads the SSE stream and sends each event on the channel.
func (e *env) events(t *testing.T, ctx context.Context) <-chan Event {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/api/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events content type %q", ct)
	}
	out := make(chan Event, 1024)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev Event
				if json.Unmarshal([]byte(data), &ev) == nil {
					out <- ev
				}
			}
		}
	}()
	return out
}

// waitState reads events until the job reaches state; it returns the
// events seen.
func waitState(t *testing.T, ch <-chan Event, job string, state store.JobState) []Event {
	t.Helper()
	var seen []Event
	timeout := time.After(2 * time.Minute) // a hang guard, not a speed assertion
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("event stream ended before job %s was %s", job, state)
			}
			if ev.Job != job {
				continue
			}
			seen = append(seen, ev)
			if ev.State == state {
				return seen
			}
			if ev.State.Finished() {
				t.Fatalf("job %s ended %s (%s), want %s", job, ev.State, ev.Error, state)
			}
		case <-timeout:
			t.Fatalf("job %s not %s; events %+v", job, state, seen)
		}
	}
}

// wantInvalidJob posts a job body the API must refuse with 400
// {"code": "invalid"} and a message containing want.
func (e *env) wantInvalidJob(t *testing.T, body, want string) {
	t.Helper()
	code, out := e.do(t, "POST", "/api/v1/jobs", "", body)
	var ae apiError
	if code != http.StatusBadRequest || json.Unmarshal([]byte(out), &ae) != nil || ae.Code != "invalid" || !strings.Contains(ae.Message, want) {
		t.Fatalf("POST %s: %d %s; want 400 with %q", body, code, out, want)
	}
}

func postJob(t *testing.T, e *env, body string) store.Job {
	t.Helper()
	code, out := e.do(t, "POST", "/api/v1/jobs", "", body)
	if code != http.StatusCreated {
		t.Fatalf("POST job: %d %s", code, out)
	}
	var j store.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// wantSearchAndRounds checks a study's trials: search trials (repeat 0),
// then whole re-measurement rounds, each measuring the same configs
// (vLLM's default and the finalists) once, and the closing run of the
// default (round rounds+1, the default alone); and every ok trial has a
// throughput.
func wantSearchAndRounds(t *testing.T, rows []trialRow, search, rounds int) {
	t.Helper()
	n := 0
	byRound := map[int]map[string]bool{}
	for _, r := range rows {
		if r.Repeat == 0 {
			n++
		} else {
			if byRound[r.Repeat] == nil {
				byRound[r.Repeat] = map[string]bool{}
			}
			byRound[r.Repeat][r.ConfigID] = true
		}
		if r.State == store.StateOK && (r.Throughput == nil || *r.Throughput <= 0) {
			t.Fatalf("ok trial %s without throughput", r.ID)
		}
	}
	if n != search {
		t.Fatalf("%d trials, %d search; want %d search trials", len(rows), n, search)
	}
	per := len(byRound[1])
	ok := len(byRound) == rounds+1 && per >= 2 && len(rows) == search+rounds*per+1 && len(byRound[rounds+1]) == 1
	for r, cs := range byRound {
		ok = ok && (len(cs) == per || r == rounds+1)
		for id := range byRound[rounds+1] {
			ok = ok && cs[id] // the closing run is of a config of every round: the default
		}
	}
	if !ok {
		t.Fatalf("%d trials in re-measurement rounds %v; want %d whole rounds of the default and the finalists and the default's closing run", len(rows), byRound, rounds)
	}
}

func TestJobRunsToDoneWithProgressFrontAndRecommendation(t *testing.T) {
	e := newEnv(t, "", Config{}, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := e.events(t, ctx)
	j := postJob(t, e, simJob(4))
	if j.State != store.JobQueued || j.ID == "" {
		t.Fatalf("posted job %+v", j)
	}
	seen := waitState(t, ch, j.ID, store.JobDone)
	// Progress as the CLI's line shows it: trial n/N, then the best so far.
	var sawTrial, sawBest bool
	for _, ev := range seen {
		if ev.Total == 4 && ev.Done >= 1 && strings.Contains(ev.Line, fmt.Sprintf("trial %d/4", ev.Done)) {
			sawTrial = true
		}
		sawBest = sawBest || (ev.Best != nil && *ev.Best > 0 && ev.Front > 0)
	}
	if !sawTrial || !sawBest {
		t.Fatalf("no trial n/N or best-so-far progress in %+v", seen)
	}

	code, out := e.do(t, "GET", "/api/v1/jobs/"+j.ID, "", "")
	var got store.Job
	if code != 200 || json.Unmarshal([]byte(out), &got) != nil || got.State != store.JobDone || got.Study == "" {
		t.Fatalf("GET job: %d %s", code, out)
	}
	code, out = e.do(t, "GET", "/api/v1/studies/"+got.Study+"/trials", "", "")
	var page trialPage
	if code != 200 || json.Unmarshal([]byte(out), &page) != nil || page.Total != len(page.Trials) {
		t.Fatalf("trials: %d %s", code, out)
	}
	rows := page.Trials
	wantSearchAndRounds(t, rows, 4, 2)
	code, out = e.do(t, "GET", "/api/v1/studies/"+got.Study+"/front", "", "")
	var front frontDoc
	if code != 200 || json.Unmarshal([]byte(out), &front) != nil || len(front.Front) == 0 {
		t.Fatalf("front: %d %s", code, out)
	}
	for _, c := range front.Front {
		if !c.Feasible {
			t.Fatalf("infeasible front member %s", c.ConfigID)
		}
	}
	code, out = e.do(t, "GET", "/api/v1/studies/"+got.Study+"/recommend?format=command", "", "")
	if code != 200 || !strings.HasPrefix(out, "vllm serve "+testModel+" ") {
		t.Fatalf("recommend command: %d %q", code, out)
	}
	code, out = e.do(t, "GET", "/api/v1/studies/"+got.Study+"/recommend", "", "")
	var rec tuner.Recommendation
	if code != 200 || json.Unmarshal([]byte(out), &rec) != nil || !rec.Feasible || rec.YAML == "" || !strings.HasSuffix(strings.TrimSpace(rec.Command), strings.Join(rec.Flags, " ")) {
		t.Fatalf("recommend json: %d %s", code, out)
	}
	code, out = e.do(t, "GET", "/api/v1/studies/"+got.Study+"/front.html", "", "")
	if code != 200 || !strings.Contains(out, "echarts") {
		t.Fatalf("front.html: %d", code)
	}
	code, out = e.do(t, "GET", "/metrics", "", "")
	n := len(rows)
	if code != 200 || !strings.Contains(out, fmt.Sprintf(`tuner_trials_total{class="",verdict="ok"} %d`, n)) || !strings.Contains(out, `tuner_best_feasible_throughput{study="`+got.Study+`"}`) {
		t.Fatalf("metrics:\n%s", out)
	}
	// The core's observer: an engine started, a trial begun and finished
	// for every row, the surrogate refit at least once.
	for _, want := range []string{fmt.Sprintf("tuner_engine_start_seconds_count %d", n), fmt.Sprintf(`tuner_store_write_seconds_count{op="begin"} %d`, n),
		fmt.Sprintf(`tuner_store_write_seconds_count{op="finish"} %d`, n), "tuner_surrogate_fit_seconds_count "} {
		if !strings.Contains(out, want) {
			t.Fatalf("metrics: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "tuner_surrogate_fit_seconds_count 0") {
		t.Fatalf("the surrogate was never fit:\n%s", out)
	}
	code, out = e.do(t, "GET", "/", "", "")
	if code != 200 || !strings.Contains(out, `id="jobform"`) {
		t.Fatalf("dashboard: %d", code)
	}
}

// TestJobValidationIsTheCLIs: a job body is checked by SearchSpec's code,
// with the messages `tuner search` prints for the same flags.
func TestJobValidationIsTheCLIs(t *testing.T) {
	e := newEnv(t, "", Config{}, false)
	base := `"model":"` + testModel + `","gpu":"` + testGPU + `"`
	tests := []struct{ name, body, want string }{
		{"engine", `{` + base + `,"engine":"tgi"}`, `--engine "tgi": want vllm, sim or sim-virtual`},
		{"requests", `{` + base + `,"engine":"sim-virtual","requests":0}`, `--requests must be >= 1`},
		{"unbounded", `{` + base + `,"engine":"sim-virtual","trials":0,"budget":"0s","patience":0}`, `unbounded search`},
		{"port", `{` + base + `,"engine":"sim-virtual","engine_args":["--port=1"]}`, `the tuner sets --host and --port`},
		{"env", `{` + base + `,"engine":"sim-virtual","engine_env":["LD_PRELOAD=/x.so"]}`, `--engine-env LD_PRELOAD: not on the allowlist`},
		{"no gpu", `{"model":"` + testModel + `","engine":"sim-virtual"}`, `--model and --gpu go together`},
		{"unknown field", `{` + base + `,"trails":3}`, `unknown field "trails"`},
		{"server path", `{` + base + `,"engine":"sim","vllm_sim":"/bin/sh"}`, `vllm_sim names a file or program of the server`},
		{"workload file", `{` + base + `,"engine":"sim-virtual","workload":"/etc/passwd"}`, `only the built-in presets`},
		{"duration", `{` + base + `,"engine":"sim-virtual","budget":"soon"}`, `job body:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { e.wantInvalidJob(t, tt.body, tt.want) })
	}
	// The same spec through the core gives the same message.
	spec := tuner.DefaultSearchSpec()
	spec.Model, spec.GPU, spec.Engine = testModel, testGPU, "tgi"
	if err := spec.Validate(); err == nil || err.Error() != `--engine "tgi": want vllm, sim or sim-virtual` {
		t.Fatalf("core: %v", err)
	}
	if js, _ := e.st.Jobs(context.Background()); len(js) != 0 {
		t.Fatalf("invalid jobs were queued: %+v", js)
	}
}

func TestTokenAndBodyLimit(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		method     string
		path, tok  string
		body       string
		wantStatus int
	}{
		{"no token", Config{Token: "s3cret"}, "GET", "/api/v1/studies", "", "", 401},
		{"wrong token", Config{Token: "s3cret"}, "GET", "/api/v1/studies", "s3cre7", "", 401},
		{"right token", Config{Token: "s3cret"}, "GET", "/api/v1/studies", "s3cret", "", 200},
		{"metrics need it", Config{Token: "s3cret"}, "GET", "/metrics", "", "", 401},
		{"health is open", Config{Token: "s3cret"}, "GET", "/healthz", "", "", 200},
		{"public read", Config{Token: "s3cret", PublicRead: true}, "GET", "/api/v1/jobs", "", "", 200},
		{"public read, write", Config{Token: "s3cret", PublicRead: true}, "POST", "/api/v1/jobs", "", simJob(1), 401},
		{"write with token", Config{Token: "s3cret", PublicRead: true}, "POST", "/api/v1/jobs", "s3cret", simJob(1), 201},
		{"oversized body", Config{MaxBody: 512}, "POST", "/api/v1/jobs", "", `{"model":"` + strings.Repeat("x", 2048) + `"}`, 413},
		{"unknown study", Config{}, "GET", "/api/v1/studies/nope", "", "", 404},
		{"unknown job", Config{}, "GET", "/api/v1/jobs/job-9", "", "", 404},
		{"wrong method", Config{}, "DELETE", "/api/v1/jobs", "", "", 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "", tt.cfg, false)
			code, out := e.do(t, tt.method, tt.path, tt.tok, tt.body)
			if code != tt.wantStatus {
				t.Fatalf("%s %s: %d %s; want %d", tt.method, tt.path, code, out, tt.wantStatus)
			}
			if code >= 400 && code != 405 {
				var ae apiError
				if err := json.Unmarshal([]byte(out), &ae); err != nil || ae.Code == "" || ae.Message == "" {
					t.Fatalf("error body %q is not {code, message}", out)
				}
			}
		})
	}
}

// runUntilStopped queues a job body on a service over the database at
// path, stops the service (as SIGTERM does) at the first event of the job
// that stopAt accepts, and returns the job as the store then holds it; the
// store is closed.
func runUntilStopped(t *testing.T, path, body string, stopAt func(Event) bool) store.Job {
	t.Helper()
	st, err := boltstore.Open(context.Background(), path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := New(Config{DB: st})
	if err != nil {
		t.Fatal(err)
	}
	kind, spec, err := srv.parseJob(context.Background(), []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	j, err := st.AddJob(context.Background(), store.Job{Kind: kind, Spec: raw, State: store.JobQueued})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	c, _ := srv.hub.subscribe()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	for ev := range c {
		if ev.Job == j.ID && stopAt(ev) {
			stop()
			break
		}
	}
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	j, err = st.Job(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestStoppedJobResumes: a service stopped during a job (as by SIGTERM)
// leaves it running in the store with its trial interrupted; the next
// service on the same file resumes it with --resume semantics: no search
// trial lost or run twice.
func TestStoppedJobResumes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tuner.db")
	// Stop once two search trials are in.
	mid := runUntilStopped(t, path, simJob(6), func(ev Event) bool { return ev.Done >= 2 && ev.Phase == "search" })
	if mid.State != store.JobRunning || mid.Study == "" {
		t.Fatalf("after stop: %+v", mid)
	}

	e := newEnv(t, path, Config{}, false)
	ch := e.events(t, context.Background())
	e.run(t)
	waitState(t, ch, mid.ID, store.JobDone)
	fin, _ := e.st.Job(context.Background(), mid.ID)
	if fin.Runs != 2 || fin.Study != mid.Study {
		t.Fatalf("resumed job %+v; want 2 runs on study %s", fin, mid.Study)
	}
	trials, err := e.st.Trials(context.Background(), fin.Study, store.TrialFilter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	finished := 0
	for _, tr := range trials {
		if tr.Repeat == 0 && tr.State != store.StateInterrupted {
			finished++
			seen[tr.ConfigID]++
		}
	}
	if finished != 6 {
		t.Fatalf("%d finished search trials; want 6 (none lost or doubled): %+v", finished, trials)
	}
	for id, n := range seen {
		if n > 1 {
			t.Fatalf("config %s searched %d times", id, n)
		}
	}
}

func FuzzParseJob(f *testing.F) {
	f.Add(simJob(3))
	f.Add(`{"model":"` + testModel + `","gpu":"` + testGPU + `","engine":"sim-virtual","budget":"1h","duration":"30s","enqueue":["--max-num-seqs 64"]}`)
	f.Add(`{"trials":-1}`)
	f.Add(`{"budget":12}`)
	f.Add(`[]`)
	f.Add(`{"engine_env":["A"]}{}`)
	f.Fuzz(func(t *testing.T, body string) {
		spec, err := ParseJob(strings.NewReader(body))
		if err != nil {
			var ue tuner.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %v is not a usage error (the API would answer 500)", err)
			}
			return
		}
		// An accepted spec round-trips through the queue unchanged.
		raw, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseJob(strings.NewReader(string(raw)))
		if err != nil {
			t.Fatalf("stored spec %s rejected: %v", raw, err)
		}
		if b, _ := json.Marshal(again); string(b) != string(raw) {
			t.Fatalf("round trip changed the spec:\n%s\n%s", raw, b)
		}
	})
}
