package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// Opener returns a function that opens one fresh database, the same one on
// every call, with clock now (a new one per test).
type Opener func(t *testing.T, now func() time.Time) (open func() store.DB)

// Clock returns a clock that advances one millisecond per call, so
// records carry reproducible times.
func Clock() func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

// Key is a study key of the suite.
func Key(model, gpu, workload, slo string) store.StudyKey {
	return store.StudyKey{Model: model, GPU: gpu, GPUCount: 1, Engine: "sim", EngineVersion: "0.10.1",
		Workload: workload, SLO: slo, SpaceHash: "abc123"}
}

// Config draws a small vLLM-like config.
func Config(r *rand.Rand) spaces.Config {
	return spaces.NewConfig(map[string]spaces.Value{
		"max_num_seqs":           spaces.IntValue(8 << r.IntN(8)),
		"max_num_batched_tokens": spaces.IntValue(1024 << r.IntN(5)),
		"gpu_memory_utilization": spaces.FloatValue(0.80 + float64(r.IntN(15))/100),
		"enable_chunked_prefill": spaces.BoolValue(r.IntN(2) == 0),
		"kv_cache_dtype":         spaces.StringValue([]string{"auto", "fp8"}[r.IntN(2)]),
	})
}

// Result is a synthetic measurement of cfg; some fail, some are unstable.
func Result(r *rand.Rand, cfg spaces.Config) *trial.Result { return ResultOneIn(r, cfg, 10) }

// ResultOneIn is Result where one trial in n fails (and one in n is
// unstable): throughput and latency trade off through max_num_seqs, VRAM
// follows gpu_memory_utilization.
func ResultOneIn(r *rand.Rand, cfg spaces.Config, n int) *trial.Result {
	res := &trial.Result{
		SchemaVersion: trial.ResultVersion, Config: cfg, ConfigID: cfg.ID(), Workload: "chat",
		GPU: trial.GPUIdentity{Name: "H100-80GB", Count: 1}, Status: trial.StatusOK,
	}
	switch x := r.IntN(n); {
	case x == 0:
		res.Status, res.Failure, res.Error = trial.StatusFailed, trial.FailOOM, "CUDA out of memory"
		return res
	case x == 1:
		res.Status = trial.StatusUnstable
	}
	seqs := float64(cfg.Int("max_num_seqs"))
	tput := 300*seqs/(seqs+40) + r.Float64()*500
	tpot := 8 + seqs/12 + r.Float64()*20
	m := trial.Metrics{
		Completed: 200, DurationS: 60, OutputThroughput: tput, RequestThroughput: tput / 128,
		TTFT: trial.Dist{Mean: 90, Median: 80, P99: 100 + r.Float64()*900},
		TPOT: trial.Dist{Mean: tpot * 0.7, Median: tpot * 0.6, P99: tpot},
	}
	// What the summaries keep beside the values, for some configs (no
	// random draws: the sequence of draws stays as it was).
	k := cfg.Int("max_num_seqs")
	m.Failed, m.TokenMismatches = k%3, k%4
	if k%2 == 0 {
		m.PrefixCache = trial.NewPrefixCache(1000, float64(k%1000))
	}
	if k%5 == 0 {
		m.Fairness = &trial.Fairness{TTFTP95Ratio: 1.5, E2ELP95Ratio: 1.25, Worst: "b", Best: "a"}
	}
	if k%7 == 0 {
		m.Missing = []string{"ttft_p90"}
	}
	if k%3 == 0 {
		res.ServeArgs = []string{"--enable-lora", "--max-loras", "2"}
	}
	res.VRAMSource = "nvml"
	res.Phases = trial.Phases{StartupS: float64(k%50) / 2, MeasureS: 60, TotalS: 62 + float64(k%50)/2}
	res.Levels = []trial.Level{{Concurrency: 64, Metrics: m, SLOMet: true}}
	res.PeakVRAMGiB = 80 * cfg.Float("gpu_memory_utilization")
	return res
}

// Script writes the same studies, trials and models into b for a seed:
// three studies (two share a model and GPU, so a group front and history
// span them), n trials each with every end state, one trial left running.
func Script(t testing.TB, b store.DB, seed uint64, n int) []store.Study {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 1))
	var studies []store.Study
	for _, k := range []store.StudyKey{
		Key("llama-8b", "H100", "chat", ""),
		Key("llama-8b", "H100", "rag", "ttft_p99<=800ms"),
		Key("qwen-7b", "L4", "chat", ""),
	} {
		st, err := b.EnsureStudy(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		studies = append(studies, st)
	}
	for i := range n * len(studies) {
		st := studies[i%len(studies)]
		cfg := Config(r)
		tr, err := b.BeginTrial(ctx, st.ID, cfg, store.BeginOptions{Repeat: i % 2, Notes: "n"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.FinishTrial(ctx, tr.ID, Result(r, cfg)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.BeginTrial(ctx, studies[0].ID, Config(r), store.BeginOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutModel(ctx, "m1", []byte("model-bytes"), store.ModelMeta{Kind: "test", Schema: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	return studies
}

// ScriptService writes into b what the service and the workers keep beside
// Script's studies (studies are its result): the spec the workers of
// studies[0] share, two finished benchmark runs (one with raw data), a bench
// job that stored the second and was gated against the first, two
// schedules with a gap in their numbering (sched-2 deleted) and the first's
// firings (one queued a job, one skipped).
func ScriptService(t testing.TB, b store.DB, studies []store.Study) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.JoinStudy(ctx, studies[0].ID, "w1", time.Minute, []byte(`{"seed":7}`))
	must(err)
	must(b.LeaveStudy(ctx, studies[0].ID, "w1"))
	t0 := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	cell := store.CellResult{Name: "chat", Requests: 3, Levels: []store.LevelResult{{Concurrency: 4, SLOMet: true, SuccessRate: 1}}}
	var runs []string
	for i, raw := range [][]byte{nil, []byte("raw-of-r2")} {
		r := &store.Run{Source: "run", Model: "m", Engine: "sim", Matrix: "smoke", MatrixHash: "h", State: store.RunOK,
			Labels: map[string]string{"schedule": "sched-1"}, Start: t0.Add(time.Duration(i) * time.Hour), Cells: []store.CellResult{cell}}
		id, err := b.ImportRun(ctx, r, [][]byte{raw})
		must(err)
		runs = append(runs, id)
	}
	body := json.RawMessage(`{"kind":"bench","tier":"smoke"}`)
	var scheds []store.Schedule
	for _, name := range []string{"nightly", "gone", "weekly"} {
		sc, err := b.AddSchedule(ctx, store.Schedule{Name: name, Cron: "0 2 * * *", Job: body, CatchUp: true, NextFire: t0})
		must(err)
		scheds = append(scheds, sc)
	}
	must(b.DeleteSchedule(ctx, scheds[1].ID))
	f, err := b.FireSchedule(ctx, scheds[0].ID, store.ScheduleFire{Slot: t0, Time: t0.Add(time.Second), Outcome: store.FireQueued},
		t0.Add(24*time.Hour), &store.Job{Kind: "bench", Spec: body, State: store.JobQueued, GPUSet: -1})
	must(err)
	t1 := t0.Add(24 * time.Hour)
	_, err = b.FireSchedule(ctx, scheds[0].ID, store.ScheduleFire{Slot: t1, Time: t1, Outcome: store.FireSkipped, Reason: "busy"}, t1.Add(24*time.Hour), nil)
	must(err)
	j, err := b.Job(ctx, f.Job)
	must(err)
	j.State, j.Runs, j.Started, j.Ended, j.BenchRuns = store.JobDone, 1, t0.Add(2*time.Second), t0.Add(time.Hour), runs[1:]
	j.Gates = []store.JobGate{{Run: runs[1], Base: runs[0], Model: "m", Verdict: "pass", Summary: "no regression"}}
	must(b.UpdateJob(ctx, j))
	_, err = b.AddJob(ctx, store.Job{Kind: "search", Spec: json.RawMessage(`{"trials":3}`), State: store.JobQueued, GPUSet: -1, Created: t0})
	must(err)
}

// Snapshot is everything a reader can observe, as JSON (what two backends
// must agree on).
func Snapshot(t testing.TB, b store.DB) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	put := func(name string, v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(j)
	}
	studies, err := b.Studies(ctx)
	put("studies", studies, err)
	groups := map[string]store.Group{}
	for _, st := range studies {
		ts, err := b.Trials(ctx, st.ID, store.TrialFilter{})
		put("trials/"+st.ID, ts, err)
		f, err := b.Front(ctx, st.ID, store.FrontQuery{})
		put("front/"+st.ID, f, err)
		f, err = b.Front(ctx, st.ID, store.FrontQuery{IncludeUnstable: true})
		put("front-unstable/"+st.ID, f, err)
		groups[st.Key.GroupKey()] = st.Key.Group()
		h, err := b.History(ctx, store.HistoryQuery{Model: st.Key.Model, GPU: st.Key.GPU})
		put("history/"+st.Key.Model, h, err)
		ht, err := b.HistoryTrials(ctx, store.HistoryQuery{Model: st.Key.Model, GPU: st.Key.GPU})
		put("history-trials/"+st.Key.Model, ht, err)
	}
	for k, g := range groups {
		f, err := b.GroupFront(ctx, g, store.FrontQuery{})
		put("group/"+k, f, err)
	}
	ms, err := b.ListModels(ctx)
	put("models", ms, err)
	for _, st := range studies {
		spec, err := b.StudySpec(ctx, st.ID)
		if errors.Is(err, store.ErrNotFound) {
			spec, err = nil, nil
		}
		put("spec/"+st.ID, string(spec), err)
	}
	runs, err := b.Runs(ctx, store.RunFilter{})
	put("runs", runs, err)
	for _, r := range runs {
		for i, c := range r.Cells {
			if c.RawKey != "" {
				raw, err := b.RunRaw(ctx, r.ID, i)
				put(fmt.Sprintf("raw/%s/%d", r.ID, i), string(raw), err)
			}
		}
	}
	jobs, err := b.Jobs(ctx)
	put("jobs", jobs, err)
	scheds, err := b.Schedules(ctx)
	put("schedules", scheds, err)
	for _, sc := range scheds {
		fires, err := b.ScheduleFires(ctx, sc.ID, 0)
		put("fires/"+sc.ID, fires, err)
	}
	return out
}

// Run runs the suite against a backend.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func() store.DB)
	}{
		{"Studies", testStudies},
		{"TrialLifecycle", testLifecycle},
		{"FrontsEqualRebuilt", testFronts},
		{"History", testHistory},
		{"Models", testModels},
		{"Interrupted", testInterrupted},
		{"InvalidResult", testInvalidResult},
		{"Jobs", testJobs},
		{"Summaries", testSummaries},
		{"Leases", testLeases},
		{"BenchmarkRuns", testRuns},
		{"Schedules", testSchedules},
		{"ImportJobsSchedules", testImportJobsSchedules},
		{"Check", testCheck},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t, Clock())) })
	}
}

// testCheck: Check (what `tuner db check` runs on either backend) finds no
// problem in a database the script wrote and counts what it holds.
func testCheck(t *testing.T, open func() store.DB) {
	b := openOne(t, open)
	Script(t, b, 5, 4) // 3 studies, 12 finished trials and 1 running, 1 model
	rep, err := b.Check(context.Background())
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("check: %v, problems %q", err, rep.Problems)
	}
	if rep.Path != b.Path() || rep.Schema <= 0 || rep.Studies != 3 || rep.Trials != 13 || rep.Running != 1 || rep.Models != 1 {
		t.Fatalf("check report %+v, want 3 studies, 13 trials (1 running), 1 model, a schema, path %s", rep, b.Path())
	}
}

func openOne(t *testing.T, open func() store.DB) store.DB {
	b := open()
	t.Cleanup(func() { b.Close() })
	return b
}

func testStudies(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	b := openOne(t, open)
	a, err := b.EnsureStudy(ctx, Key("m", "g", "chat", "ttft_p99<=800ms"))
	if err != nil {
		t.Fatal(err)
	}
	// Equivalent SLO spelling and defaults: the same study.
	k := Key("m", "g", "chat", "ttft_p99<=0.8s")
	k.GPUCount = 0
	a2, err := b.EnsureStudy(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if a2.ID != a.ID || !a2.Created.Equal(a.Created) {
		t.Fatalf("equivalent key gave %s (%v), want %s (%v)", a2.ID, a2.Created, a.ID, a.Created)
	}
	c, err := b.EnsureStudy(ctx, Key("m", "g", "rag", ""))
	if err != nil {
		t.Fatal(err)
	}
	all, err := b.Studies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != a.ID || all[1].ID != c.ID {
		t.Fatalf("studies %+v, want %s then %s", all, a.ID, c.ID)
	}
	got, err := b.Study(ctx, c.ID)
	if err != nil || !sameJSON(t, got.Key, c.Key) {
		t.Fatalf("study %s: %+v, %v", c.ID, got, err)
	}
	if _, err := b.Study(ctx, "000000000000"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing study: %v, want ErrNotFound", err)
	}
	if _, err := b.EnsureStudy(ctx, store.StudyKey{}); err == nil {
		t.Fatal("empty key accepted")
	}
}

func testLifecycle(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	b := openOne(t, open)
	r := rand.New(rand.NewPCG(1, 2))
	st, err := b.EnsureStudy(ctx, Key("m", "g", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.BeginTrial(ctx, "000000000000", Config(r), store.BeginOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("begin in a missing study: %v", err)
	}
	var ids []string
	for i := range 4 {
		tr, err := b.BeginTrial(ctx, st.ID, Config(r), store.BeginOptions{Repeat: i})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Seq != uint64(i+1) || tr.ID != store.TrialID(st.ID, tr.Seq) || tr.State != store.StateRunning || tr.Repeat != i {
			t.Fatalf("trial %d: %+v", i, tr)
		}
		ids = append(ids, tr.ID)
	}
	cfg := Config(r)
	ok := Result(rand.New(rand.NewPCG(3, 3)), cfg)
	ok.Status, ok.Failure = trial.StatusOK, ""
	if ok.Levels == nil {
		ok = Result(rand.New(rand.NewPCG(5, 5)), cfg)
	}
	unstable := *ok
	unstable.Status = trial.StatusUnstable
	failed := &trial.Result{Status: trial.StatusFailed, Failure: trial.FailOOM, Error: "oom"}
	interrupted := &trial.Result{Status: trial.StatusFailed, Failure: trial.FailInterrupted}
	want := []store.State{store.StateOK, store.StateUnstable, store.StateFailed, store.StateInterrupted}
	for i, res := range []*trial.Result{ok, &unstable, failed, interrupted} {
		done, err := b.FinishTrial(ctx, ids[i], res)
		if err != nil {
			t.Fatal(err)
		}
		if done.State != want[i] || done.Ended.IsZero() || done.Result == nil {
			t.Fatalf("finished %s: state %s, want %s", ids[i], done.State, want[i])
		}
	}
	if _, err := b.FinishTrial(ctx, ids[0], ok); !errors.Is(err, store.ErrState) {
		t.Fatalf("finishing twice: %v, want ErrState", err)
	}
	if _, err := b.FinishTrial(ctx, store.TrialID(st.ID, 99), ok); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("finishing a missing trial: %v, want ErrNotFound", err)
	}
	if err := b.SetNotes(ctx, ids[1], "noisy"); err != nil {
		t.Fatal(err)
	}
	got, err := b.Trial(ctx, ids[1])
	if err != nil || got.Notes != "noisy" || got.State != store.StateUnstable {
		t.Fatalf("trial %s: %+v, %v", ids[1], got, err)
	}
	all, err := b.Trials(ctx, st.ID, store.TrialFilter{})
	if err != nil || len(all) != 4 {
		t.Fatalf("trials: %d, %v", len(all), err)
	}
	for i, tr := range all {
		if tr.Seq != uint64(i+1) {
			t.Fatalf("trials out of order: %d at %d", tr.Seq, i)
		}
	}
	sel, err := b.Trials(ctx, st.ID, store.TrialFilter{States: []store.State{store.StateOK, store.StateFailed}})
	if err != nil || len(sel) != 2 || sel[0].ID != ids[0] || sel[1].ID != ids[2] {
		t.Fatalf("filtered trials: %v, %v", sel, err)
	}
	byCfg, err := b.Trials(ctx, st.ID, store.TrialFilter{ConfigID: all[3].ConfigID})
	if err != nil || len(byCfg) == 0 || !slices.ContainsFunc(byCfg, func(x store.Trial) bool { return x.ID == ids[3] }) {
		t.Fatalf("trials by config: %v, %v", byCfg, err)
	}
	// The tail from a trial number on, and nothing (no error) past the end.
	for from, want := range map[uint64][]string{0: ids, 1: ids, 3: ids[2:], 4: ids[3:], 5: nil, 9: nil} {
		tail, err := b.Trials(ctx, st.ID, store.TrialFilter{FromSeq: from})
		var got []string
		for _, x := range tail {
			got = append(got, x.ID)
		}
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("trials from %d: %v, %v; want %v", from, got, err, want)
		}
	}
	if _, err := b.Trials(ctx, "000000000000", store.TrialFilter{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("trials of a missing study: %v", err)
	}
	if _, err := b.Trial(ctx, "nonsense"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bad trial ID: %v", err)
	}
}

func testFronts(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	b := openOne(t, open)
	studies := Script(t, b, 7, 25)
	for _, st := range studies {
		m, err := b.Front(ctx, st.ID, store.FrontQuery{})
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.RebuildFront(ctx, st.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !store.SameFront(m, rb) {
			t.Fatalf("study %s: maintained front %d points, rebuilt %d", st.ID, len(m.Points), len(rb.Points))
		}
		if st.Key.Model == "llama-8b" && len(m.Points) == 0 {
			t.Fatalf("study %s: empty front after 25 trials", st.ID)
		}
		g := st.Key.Group()
		gm, err := b.GroupFront(ctx, g, store.FrontQuery{})
		if err != nil {
			t.Fatal(err)
		}
		grb, err := b.RebuildGroupFront(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		if !store.SameFront(gm, grb) {
			t.Fatalf("group %s: maintained %d points, rebuilt %d", g.Key(), len(gm.Points), len(grb.Points))
		}
	}
	// The group front of the two llama studies spans both.
	gm, _ := b.GroupFront(ctx, studies[0].Key.Group(), store.FrontQuery{})
	from := map[string]bool{}
	for _, p := range gm.Points {
		from[p.StudyID] = true
	}
	if len(from) == 0 {
		t.Fatal("empty group front")
	}
	// A front under an extra SLO is recomputed: every point meets it.
	slo, err := trial.ParseSLO("ttft_p99<=300ms")
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.Front(ctx, studies[0].ID, store.FrontQuery{SLO: slo})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Points {
		tr, err := b.Trial(ctx, p.TrialID)
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := slo.Check(tr.Result.Metrics()); !ok {
			t.Fatalf("point %s breaks the query's SLO", p.TrialID)
		}
	}
	empty, err := b.Front(ctx, studies[2].ID, store.FrontQuery{})
	if err != nil || empty.Points == nil {
		t.Fatalf("front: %+v, %v (points must be a non-nil list)", empty, err)
	}
}

func testHistory(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	b := openOne(t, open)
	studies := Script(t, b, 11, 8)
	h, err := b.History(ctx, store.HistoryQuery{Model: "llama-8b", GPU: "H100"})
	if err != nil {
		t.Fatal(err)
	}
	// Two studies of 8 finished trials each; the running one is left out.
	if len(h) != 16 {
		t.Fatalf("history: %d summaries, want 16", len(h))
	}
	for i := 1; i < len(h); i++ {
		if h[i].Started.Before(h[i-1].Started) {
			t.Fatalf("history out of order at %d", i)
		}
	}
	for _, sm := range h {
		if sm.StudyID != studies[0].ID && sm.StudyID != studies[1].ID {
			t.Fatalf("history has study %s", sm.StudyID)
		}
	}
	ht, err := b.HistoryTrials(ctx, store.HistoryQuery{Model: "llama-8b", GPU: "H100", States: []store.State{store.StateRunning}})
	if err != nil || len(ht) != 1 || ht[0].State != store.StateRunning {
		t.Fatalf("running history: %v, %v", ht, err)
	}
	none, err := b.History(ctx, store.HistoryQuery{Model: "llama-8b", GPU: "H100", Engine: "vllm"})
	if err != nil || len(none) != 0 {
		t.Fatalf("history of another engine: %d, %v", len(none), err)
	}
	for _, sm := range h {
		tr, err := b.Trial(ctx, sm.ID())
		if err != nil {
			t.Fatal(err)
		}
		if want := store.Summarize(&tr); !sameJSON(t, want, sm) {
			t.Fatalf("summary of %s differs from its trial", sm.ID())
		}
	}
}

func sameJSON(t testing.TB, a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return string(ja) == string(jb)
}

func testModels(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	b := openOne(t, open)
	if err := b.PutModel(ctx, "b", []byte("two"), store.ModelMeta{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutModel(ctx, "a", []byte("one"), store.ModelMeta{}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutModel(ctx, "b", []byte("three"), store.ModelMeta{Kind: "k2"}); err != nil {
		t.Fatal(err)
	}
	data, meta, err := b.GetModel(ctx, "b")
	if err != nil || string(data) != "three" || meta.Kind != "k2" || meta.Size != 5 || meta.SHA256 == "" {
		t.Fatalf("get b: %q %+v %v", data, meta, err)
	}
	ms, err := b.ListModels(ctx)
	if err != nil || len(ms) != 2 || ms[0].Name != "a" || ms[1].Name != "b" {
		t.Fatalf("list: %+v %v", ms, err)
	}
	if err := b.DeleteModel(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteModel(ctx, "b"); err != nil {
		t.Fatalf("deleting a missing model: %v", err)
	}
	if _, _, err := b.GetModel(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted model: %v", err)
	}
	if err := b.PutModel(ctx, "bad", nil, store.ModelMeta{Schema: json.RawMessage("{")}); err == nil {
		t.Fatal("invalid schema accepted")
	}
}

// testInterrupted: a running trial of a writer that is gone is marked
// interrupted by the next writer; a live writer's is left alone.
func testInterrupted(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(9, 9))
	a := open()
	st, err := a.EnsureStudy(ctx, Key("m", "g", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := a.BeginTrial(ctx, st.ID, Config(r), store.BeginOptions{Notes: "first"})
	if err != nil {
		t.Fatal(err)
	}
	live := open() // a is alive: its trial stays running
	got, err := live.Trial(ctx, tr.ID)
	if err != nil || got.State != store.StateRunning {
		t.Fatalf("a live writer's trial: %s, %v", got.State, err)
	}
	live.Close()
	a.Close()
	b := openOne(t, open)
	got, err = b.Trial(ctx, tr.ID)
	if err != nil || got.State != store.StateInterrupted || got.Ended.IsZero() || got.Notes != "first; interrupted: the writing process died" {
		t.Fatalf("a dead writer's trial: %+v, %v", got, err)
	}
	if _, err := b.FinishTrial(ctx, tr.ID, &trial.Result{Status: trial.StatusOK}); !errors.Is(err, store.ErrState) {
		t.Fatalf("finishing an interrupted trial: %v, want ErrState", err)
	}
}

func testInvalidResult(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	b := openOne(t, open)
	r := rand.New(rand.NewPCG(4, 4))
	st, err := b.EnsureStudy(ctx, Key("m", "g", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config(r)
	tr, err := b.BeginTrial(ctx, st.ID, cfg, store.BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := Result(rand.New(rand.NewPCG(5, 5)), cfg)
	res.PeakVRAMGiB = math.NaN()
	if _, err := b.FinishTrial(ctx, tr.ID, res); !errors.Is(err, store.ErrInvalidResult) {
		t.Fatalf("NaN result: %v, want ErrInvalidResult", err)
	}
	if _, err := b.FinishTrial(ctx, tr.ID, nil); !errors.Is(err, store.ErrInvalidResult) {
		t.Fatalf("nil result: %v, want ErrInvalidResult", err)
	}
	got, err := b.Trial(ctx, tr.ID)
	if err != nil || got.State != store.StateRunning {
		t.Fatalf("after a refused result: %s, %v (want running)", got.State, err)
	}
	res.PeakVRAMGiB = 70
	if _, err := b.FinishTrial(ctx, tr.ID, res); err != nil {
		t.Fatalf("repaired result: %v", err)
	}
}

func testJobs(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	b := openOne(t, open)
	if js, err := b.Jobs(ctx); err != nil || len(js) != 0 {
		t.Fatalf("jobs of a new database: %v, %v", js, err)
	}
	var added []store.Job
	for i := range 3 {
		j, err := b.AddJob(ctx, store.Job{Kind: "search", Spec: json.RawMessage(`{"trials":` + string(rune('1'+i)) + `}`), State: store.JobQueued, GPUSet: -1})
		if err != nil {
			t.Fatal(err)
		}
		if j.Seq != uint64(i+1) || j.ID != store.JobID(j.Seq) || j.Created.IsZero() || j.V != store.RecordVersion {
			t.Fatalf("added job %d: %+v", i, j)
		}
		added = append(added, j)
	}
	j := added[1]
	j.State, j.GPUSet, j.Runs, j.Study, j.Started = store.JobRunning, 0, 1, "abc", j.Created.Add(time.Second)
	if err := b.UpdateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	got, err := b.Job(ctx, j.ID)
	if err != nil || !sameJSON(t, got, j) {
		t.Fatalf("job %s after update: %+v, %v; want %+v", j.ID, got, err, j)
	}
	all, err := b.Jobs(ctx)
	if err != nil || len(all) != 3 || all[0].ID != added[0].ID || all[1].State != store.JobRunning || string(all[2].Spec) != `{"trials":3}` {
		t.Fatalf("jobs: %+v, %v", all, err)
	}
	for _, id := range []string{"job-9", "job-x", "job-01", ""} {
		if _, err := b.Job(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("job %q: %v, want ErrNotFound", id, err)
		}
	}
	if err := b.UpdateJob(ctx, store.Job{ID: "job-9", Seq: 9}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a missing job: %v, want ErrNotFound", err)
	}
}
