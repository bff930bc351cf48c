package storetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// testSummaries: Summaries are the trials' summaries in sequence order,
// filtered as Trials filters, and agree with Summarize of each trial.
func testSummaries(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	b := openOne(t, open)
	studies := Script(t, b, 3, 10)
	for _, st := range studies {
		ts, err := b.Trials(ctx, st.ID, store.TrialFilter{})
		if err != nil {
			t.Fatal(err)
		}
		sums, err := b.Summaries(ctx, st.ID, store.TrialFilter{})
		if err != nil || len(sums) != len(ts) {
			t.Fatalf("summaries of %s: %d for %d trials, %v", st.ID, len(sums), len(ts), err)
		}
		for i := range ts {
			if want := store.Summarize(&ts[i]); !sameJSON(t, want, sums[i]) {
				t.Fatalf("summary %d differs from the trial's:\nwant %+v\ngot  %+v", i, want, sums[i])
			}
		}
		f := store.TrialFilter{States: []store.State{store.StateOK}, FromSeq: 3}
		want, err := b.Trials(ctx, st.ID, f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Summaries(ctx, st.ID, f)
		if err != nil || len(got) != len(want) {
			t.Fatalf("filtered summaries: %d, want %d (%v)", len(got), len(want), err)
		}
		for i := range got {
			if got[i].ID() != want[i].ID {
				t.Fatalf("filtered summary %d is %s, want %s", i, got[i].ID(), want[i].ID)
			}
		}
	}
	if _, err := b.Summaries(ctx, "0123456789ab", store.TrialFilter{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("summaries of a missing study: %v, want ErrNotFound", err)
	}
}

// testLeases: a config (and repeat index) is claimed once; the search
// budget counts claims; a heartbeat renews only the holder's lease; an
// expired lease is reaped (the trial interrupted, its config free again);
// JoinStudy refuses a live name, records the first spec, counts as
// others the workers that are live or hold an unexpired lease and says
// whether the study held trials.
func testLeases(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	b := openOne(t, open)
	st, err := b.EnsureStudy(ctx, Key("lease", "g", "chat", ""))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := b.JoinStudy(ctx, st.ID, "a", time.Minute, []byte(`{"trials":4}`)); err != nil || m.Others != 0 || m.HadTrials {
		t.Fatalf("join a: %+v, %v", m, err)
	}
	if _, err := b.JoinStudy(ctx, st.ID, "a", time.Minute, nil); !errors.Is(err, store.ErrWorkerName) {
		t.Fatalf("second worker named a: %v, want ErrWorkerName", err)
	}
	if m, err := b.JoinStudy(ctx, st.ID, "b", time.Minute, []byte(`{"trials":9}`)); err != nil || m.Others != 1 {
		t.Fatalf("join b: %+v, %v", m, err)
	}
	if spec, err := b.StudySpec(ctx, st.ID); err != nil || string(spec) != `{"trials":4}` {
		t.Fatalf("spec: %q, %v", spec, err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	cfg := Config(r)
	long := store.ClaimOptions{Worker: "a", Lease: time.Minute, MaxSearch: 2}
	ta, err := b.ClaimTrial(ctx, st.ID, cfg, long)
	if err != nil || ta.State != store.StateRunning || ta.Worker != "a" {
		t.Fatalf("claim: %+v, %v", ta, err)
	}
	if _, err := b.ClaimTrial(ctx, st.ID, cfg, store.ClaimOptions{Worker: "b", Lease: time.Minute}); !errors.Is(err, store.ErrClaimed) {
		t.Fatalf("second claim of the config: %v, want ErrClaimed", err)
	}
	if _, err := b.ClaimTrial(ctx, st.ID, cfg, store.ClaimOptions{Worker: "b", Lease: time.Minute, Repeat: 1}); err != nil {
		t.Fatalf("claim of a re-measurement: %v", err)
	}
	// a leaves while its trial runs: b joining again still counts it.
	if err := b.LeaveStudy(ctx, st.ID, "a"); err != nil {
		t.Fatal(err)
	}
	if err := b.LeaveStudy(ctx, st.ID, "b"); err != nil {
		t.Fatal(err)
	}
	if m, err := b.JoinStudy(ctx, st.ID, "b", time.Minute, nil); err != nil || m.Others != 1 || !m.HadTrials {
		t.Fatalf("join beside a worker that holds only a lease: %+v, %v (want 1 other, trials held)", m, err)
	}
	if err := b.Heartbeat(ctx, st.ID, "b", ta.ID, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("heartbeat of another worker's trial: %v, want ErrLeaseLost", err)
	}
	if err := b.Heartbeat(ctx, st.ID, "a", ta.ID, time.Minute); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	short := store.ClaimOptions{Worker: "c", Lease: 200 * time.Millisecond, MaxSearch: 2}
	tc, err := b.ClaimTrial(ctx, st.ID, Config(r), short)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ClaimTrial(ctx, st.ID, Config(r), short); !errors.Is(err, store.ErrTrialBudget) {
		t.Fatalf("a third search trial of 2: %v, want ErrTrialBudget", err)
	}
	time.Sleep(400 * time.Millisecond)
	reaped, err := b.ReapExpired(ctx, st.ID)
	if err != nil || len(reaped) != 1 || reaped[0].ID != tc.ID || reaped[0].State != store.StateInterrupted {
		t.Fatalf("reap: %+v, %v (want %s interrupted)", reaped, err, tc.ID)
	}
	if got, err := b.Trial(ctx, tc.ID); err != nil || got.State != store.StateInterrupted {
		t.Fatalf("reaped trial: %+v, %v", got, err)
	}
	if err := b.Heartbeat(ctx, st.ID, "c", tc.ID, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("heartbeat of a reaped trial: %v, want ErrLeaseLost", err)
	}
	if _, err := b.FinishTrial(ctx, tc.ID, &trial.Result{Status: trial.StatusOK}); !errors.Is(err, store.ErrState) {
		t.Fatalf("finishing a reaped trial: %v, want ErrState", err)
	}
	// Its config is free again, and the budget counts it no more.
	if _, err := b.ClaimTrial(ctx, st.ID, tc.Config, short); err != nil {
		t.Fatalf("claim of a reaped config: %v", err)
	}
	if _, err := b.FinishTrial(ctx, ta.ID, Result(r, ta.Config)); err != nil {
		t.Fatal(err)
	}
	if err := b.Heartbeat(ctx, st.ID, "a", ta.ID, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("heartbeat of a finished trial: %v, want ErrLeaseLost", err)
	}
	// The summaries name who ran each trial (the trials table shows it).
	ts, err := b.Trials(ctx, st.ID, store.TrialFilter{})
	if err != nil {
		t.Fatal(err)
	}
	sums, err := b.Summaries(ctx, st.ID, store.TrialFilter{})
	if err != nil || len(sums) != len(ts) || sums[0].Worker != "a" || sums[0].Ended.IsZero() {
		t.Fatalf("summaries of a shared study: %+v, %v", sums, err)
	}
	for i := range ts {
		if want := store.Summarize(&ts[i]); !sameJSON(t, want, sums[i]) {
			t.Fatalf("summary %d differs from the trial's:\nwant %+v\ngot  %+v", i, want, sums[i])
		}
	}
}

// testRuns: benchmark runs: begin, cells with raw data, finish, import,
// filters, latest, and the state checks.
func testRuns(t *testing.T, open func() store.DB) {
	ctx := context.Background()
	b := openOne(t, open)
	if _, err := b.Run(ctx, "r1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("run of an empty database: %v, want ErrNotFound", err)
	}
	start := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	r := &store.Run{Source: "run", Model: "m", Engine: "sim", Matrix: "smoke", MatrixHash: "h", Tier: "smoke",
		Labels: map[string]string{"commit": "abc"}, Start: start}
	id, err := b.BeginRun(ctx, r)
	if err != nil || id != "r1" {
		t.Fatalf("begin run: %q, %v", id, err)
	}
	cell := store.CellResult{Name: "chat", Requests: 3, Levels: []store.LevelResult{{Concurrency: 4, SLOMet: true, SuccessRate: 1}}}
	if err := b.AddCell(ctx, id, cell, []byte("raw-0")); err != nil {
		t.Fatal(err)
	}
	if err := b.AddCell(ctx, id, store.CellResult{Name: "long", Error: "stopped"}, []byte("raw-1")); err != nil {
		t.Fatal(err)
	}
	if err := b.FinishRun(ctx, id, store.RunPartial, "stopped", start.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := b.AddCell(ctx, id, cell, nil); !errors.Is(err, store.ErrRunState) {
		t.Fatalf("cell of a finished run: %v, want ErrRunState", err)
	}
	if err := b.FinishRun(ctx, id, store.RunOK, "", start); !errors.Is(err, store.ErrRunState) {
		t.Fatalf("finishing twice: %v, want ErrRunState", err)
	}
	got, err := b.Run(ctx, id)
	if err != nil || got.State != store.RunPartial || got.Reason != "stopped" || len(got.Cells) != 2 ||
		got.Cells[1].RawKey != store.RawKey(id, 1) || got.Cells[0].RawBytes != 5 || !got.End.Equal(start.Add(time.Minute)) {
		t.Fatalf("run: %+v, %v", got, err)
	}
	if raw, err := b.RunRaw(ctx, id, 1); err != nil || string(raw) != "raw-1" {
		t.Fatalf("raw: %q, %v", raw, err)
	}
	if _, err := b.RunRaw(ctx, id, 2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("raw of a missing cell: %v", err)
	}
	imp := &store.Run{Source: "import", Model: "other", Engine: "vllm", State: store.RunOK, Start: start, Cells: []store.CellResult{cell, cell}}
	id2, err := b.ImportRun(ctx, imp, [][]byte{nil, []byte("imported")})
	if err != nil || id2 != "r2" {
		t.Fatalf("import: %q, %v", id2, err)
	}
	latest, err := b.Run(ctx, "latest")
	if err != nil || latest.ID != "r2" || latest.Cells[0].RawKey != "" || latest.Cells[1].RawKey == "" {
		t.Fatalf("latest: %+v, %v", latest, err)
	}
	for _, tc := range []struct {
		f    store.RunFilter
		want []string
	}{
		{store.RunFilter{}, []string{"r1", "r2"}},
		{store.RunFilter{Model: "other"}, []string{"r2"}},
		{store.RunFilter{Tier: "smoke"}, []string{"r1"}},
		{store.RunFilter{Labels: map[string]string{"commit": ""}}, []string{"r1"}},
		{store.RunFilter{Labels: map[string]string{"commit": "x"}}, nil},
	} {
		runs, err := b.Runs(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("runs %+v: %v, want %v", tc.f, ids, tc.want)
		}
	}
	// A running run of this writer stays running.
	id3, err := b.BeginRun(ctx, &store.Run{Source: "run", Model: "m", Start: start})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := b.Run(ctx, id3); err != nil || r.State != store.RunRunning {
		t.Fatalf("own running run: %+v, %v", r, err)
	}
	// Its writer gone, it reads as partial with the cells it stored.
	b.Close()
	b2 := openOne(t, open)
	if r, err := b2.Run(ctx, id3); err != nil || r.State != store.RunPartial {
		t.Fatalf("run of a dead writer: %+v, %v, want partial", r, err)
	}
}
