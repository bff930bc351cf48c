package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/storetest"
	"github.com/vllm-tuner/tuner/trial"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDefaultPath(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"xdg", map[string]string{"XDG_DATA_HOME": "/data", "HOME": "/home/u"}, "/data/tuner/tuner.db"},
		{"home", map[string]string{"HOME": "/home/u"}, "/home/u/.local/share/tuner/tuner.db"},
		{"relative xdg ignored", map[string]string{"XDG_DATA_HOME": "rel", "HOME": "/home/u"}, "/home/u/.local/share/tuner/tuner.db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DefaultPath(func(k string) string { return tc.env[k] })
			if err != nil || got != tc.want {
				t.Errorf("DefaultPath = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestOpenModes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "dir", "tuner.db")
	if _, err := Open(ctx, path, Options{ReadOnly: true}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("read-only open of a missing file: %v, want ErrNotFound", err)
	}
	w := openTest(t, path, false)
	st, err := w.EnsureStudy(ctx, testKey("m", "g", ""))
	if err != nil {
		t.Fatal(err)
	}
	ro := openTest(t, path, true)
	if _, err := ro.EnsureStudy(ctx, testKey("m", "g", "")); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("write through read-only store: %v", err)
	}
	got, err := ro.Study(ctx, st.ID)
	if err != nil || got.ID != st.ID {
		t.Fatalf("read back study: %v %v", got, err)
	}
	w.Close()
	if _, err := w.Studies(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("closed store: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ro.Studies(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestEnsureStudy(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "", false)
	a, err := s.EnsureStudy(ctx, testKey("llama", "H100-80GB", "ttft_p99<=0.8s,tpot_p99<=60ms"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.EnsureStudy(ctx, testKey("llama", "H100-80GB", "ttft_p99<=800ms, tpot_p99<=60"))
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != b.ID || !a.Created.Equal(b.Created) {
		t.Errorf("equivalent keys gave %s and %s", a.ID, b.ID)
	}
	if a.Key.SLO != "ttft_p99<=800ms,tpot_p99<=60ms" || !a.Key.Objectives.Equal(store.DefaultObjectives("tpot_p99")) {
		t.Errorf("normalised key: %+v", a.Key)
	}
	k := testKey("llama", "H100-80GB", "")
	k.Objectives = store.DefaultObjectives("ttft_p99")
	c, err := s.EnsureStudy(ctx, k)
	if err != nil || c.ID == a.ID {
		t.Fatalf("different objectives share id: %v", err)
	}
	all, err := s.Studies(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("Studies = %d, %v", len(all), err)
	}
	for _, bad := range []store.StudyKey{{GPU: "g"}, {Model: "m", GPU: "g", SLO: "nonsense"}, {Model: "m", GPU: "g", Objectives: pareto.Objectives{{Name: "x"}}}} {
		if _, err := s.EnsureStudy(ctx, bad); err == nil {
			t.Errorf("EnsureStudy(%+v): want error", bad)
		}
	}
}

func TestTrialLifecycle(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "", false)
	st, _ := s.EnsureStudy(ctx, testKey("m", "g", ""))
	r := rand.New(rand.NewPCG(1, 1))
	cfg := storetest.Config(r)
	tr, err := s.BeginTrial(ctx, st.ID, cfg, store.BeginOptions{Notes: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Seq != 1 || tr.State != store.StateRunning || tr.ConfigID != cfg.ID() || tr.ID != st.ID+"-1" {
		t.Fatalf("begun trial %+v", tr)
	}
	got, err := s.Trial(ctx, tr.ID)
	if err != nil || got.State != store.StateRunning || !got.Config.Equal(cfg) {
		t.Fatalf("read running trial: %+v %v", got, err)
	}
	res := storetest.ResultOneIn(r, cfg, 20)
	res.Status, res.Failure = trial.StatusOK, ""
	done, err := s.FinishTrial(ctx, tr.ID, res)
	if err != nil || done.State != store.StateOK || done.Ended.IsZero() {
		t.Fatalf("finish: %+v %v", done, err)
	}
	if _, err := s.FinishTrial(ctx, tr.ID, res); !errors.Is(err, store.ErrState) {
		t.Errorf("second finish: %v, want ErrState", err)
	}
	nan, _ := s.BeginTrial(ctx, st.ID, cfg, store.BeginOptions{Repeat: 2})
	bad := storetest.ResultOneIn(r, cfg, 20)
	bad.PeakVRAMGiB = math.NaN()
	if _, err := s.FinishTrial(ctx, nan.ID, bad); !errors.Is(err, store.ErrInvalidResult) {
		t.Errorf("NaN result: %v, want ErrInvalidResult", err)
	}
	if _, err := s.FinishTrial(ctx, nan.ID, nil); !errors.Is(err, store.ErrInvalidResult) {
		t.Errorf("nil result: %v, want ErrInvalidResult", err)
	}
	bad.PeakVRAMGiB, bad.Status, bad.Failure = 70, trial.StatusUnstable, ""
	if d, err := s.FinishTrial(ctx, nan.ID, bad); err != nil || d.State != store.StateUnstable {
		t.Fatalf("finish after repair: %v %v", d.State, err)
	}
	again, _ := s.BeginTrial(ctx, st.ID, cfg, store.BeginOptions{Repeat: 1})
	other, _ := s.BeginTrial(ctx, st.ID, storetest.Config(r), store.BeginOptions{})
	intr := &trial.Result{Status: trial.StatusFailed, Failure: trial.FailInterrupted}
	if d, err := s.FinishTrial(ctx, other.ID, intr); err != nil || d.State != store.StateInterrupted {
		t.Fatalf("interrupted finish: %v %v", d.State, err)
	}
	if err := s.SetNotes(ctx, again.ID, "re-measure"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		f    store.TrialFilter
		want []uint64
	}{
		{"all", store.TrialFilter{}, []uint64{1, 2, 3, 4}},
		{"running", store.TrialFilter{States: []store.State{store.StateRunning}}, []uint64{3}},
		{"config", store.TrialFilter{ConfigID: cfg.ID()}, []uint64{1, 2, 3}},
		{"ok or interrupted", store.TrialFilter{States: []store.State{store.StateOK, store.StateInterrupted}}, []uint64{1, 4}},
		{"none", store.TrialFilter{ConfigID: "nope"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, err := s.Trials(ctx, st.ID, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []uint64
			for _, x := range ts {
				seqs = append(seqs, x.Seq)
			}
			if !slices.Equal(seqs, tc.want) {
				t.Errorf("got %v, want %v", seqs, tc.want)
			}
		})
	}
	if g, _ := s.Trial(ctx, again.ID); g.Notes != "re-measure" || g.Repeat != 1 {
		t.Errorf("notes/repeat: %+v", g)
	}
	for _, id := range []string{"", "x", st.ID + "-0", st.ID + "-99", "zzzzzzzzzzzz-1"} {
		if _, err := s.Trial(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Trial(%q): %v, want ErrNotFound", id, err)
		}
	}
	if _, err := s.BeginTrial(ctx, "000000000000", cfg, store.BeginOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("begin in unknown study: %v", err)
	}
	if _, err := s.Trials(ctx, "000000000000", store.TrialFilter{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("trials of unknown study: %v", err)
	}
}

// eligiblePoints is the brute-force reference: every trial of the studies
// that may enter a front under q.
func eligiblePoints(t *testing.T, s *Store, studies []store.Study, q store.FrontQuery) []store.Point {
	var out []store.Point
	for _, st := range studies {
		ts, err := s.Trials(context.Background(), st.ID, store.TrialFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range ts {
			if p, ok := store.Eligible(st, st.SLO(), &ts[i], q); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// checkFrontProperties: no member dominated by any eligible trial, every
// non-dominated eligible trial a member.
func checkFrontProperties(t *testing.T, f store.Front, cands []store.Point) {
	t.Helper()
	dirs := f.Objectives.Directions()
	in := map[string]bool{}
	for _, p := range f.Points {
		in[p.TrialID] = true
	}
	for _, c := range cands {
		dominated := false
		for _, d := range cands {
			if pareto.Dominates(d.Values, c.Values, dirs) {
				dominated = true
				break
			}
		}
		if dominated == in[c.TrialID] {
			t.Fatalf("front %s: trial %s %v dominated=%v but member=%v", f.Key, c.TrialID, c.Values, dominated, in[c.TrialID])
		}
	}
	if len(in) != len(f.Points) {
		t.Fatalf("front %s has duplicate members", f.Key)
	}
}

func TestFrontsMaintainedEqualRebuilt(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "", false)
	r := rand.New(rand.NewPCG(2, 3))
	a, _ := s.EnsureStudy(ctx, testKey("llama", "H100-80GB", "tpot_p99<=30ms"))
	kb := testKey("llama", "H100-80GB", "ttft_p99<=600ms")
	kb.Workload = "long"
	b, _ := s.EnsureStudy(ctx, kb)
	c, _ := s.EnsureStudy(ctx, testKey("qwen", "H100-80GB", ""))
	if a.Key.GroupKey() != b.Key.GroupKey() || a.Key.GroupKey() == c.Key.GroupKey() {
		t.Fatal("group keys")
	}
	for i := range 300 {
		st := []store.Study{a, b, c}[i%3]
		runTrial(t, s, r, st.ID)
		if i%50 != 49 {
			continue
		}
		for _, st := range []store.Study{a, b, c} {
			have, err := s.Front(ctx, st.ID, store.FrontQuery{})
			if err != nil {
				t.Fatal(err)
			}
			want, err := s.RebuildFront(ctx, st.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !store.SameFront(have, want) || len(have.Points) == 0 {
				t.Fatalf("study %s after %d trials: maintained %d points, rebuilt %d", st.ID, i+1, len(have.Points), len(want.Points))
			}
			checkFrontProperties(t, have, eligiblePoints(t, s, []store.Study{st}, store.FrontQuery{}))
		}
		g := a.Key.Group()
		have, err := s.GroupFront(ctx, g, store.FrontQuery{})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := s.RebuildGroupFront(ctx, g)
		if !store.SameFront(have, want) {
			t.Fatalf("group front: maintained %d, rebuilt %d", len(have.Points), len(want.Points))
		}
		checkFrontProperties(t, have, eligiblePoints(t, s, []store.Study{a, b}, store.FrontQuery{}))
	}
	// Every maintained member met its study's SLO.
	f, _ := s.Front(ctx, a.ID, store.FrontQuery{})
	for _, p := range f.Points {
		if p.Values[1] > 30 {
			t.Errorf("member %s violates tpot_p99<=30ms: %v", p.TrialID, p.Values)
		}
	}
	// Filtered queries equal the brute force over the filtered trials.
	slo, _ := trial.ParseSLO("tpot_p99<=20ms")
	for _, q := range []store.FrontQuery{{SLO: slo}, {IncludeUnstable: true}, {SLO: slo, IncludeUnstable: true}} {
		got, err := s.Front(ctx, c.ID, q)
		if err != nil {
			t.Fatal(err)
		}
		checkFrontProperties(t, got, eligiblePoints(t, s, []store.Study{c}, q))
		gf, err := s.GroupFront(ctx, a.Key.Group(), q)
		if err != nil {
			t.Fatal(err)
		}
		checkFrontProperties(t, gf, eligiblePoints(t, s, []store.Study{a, b}, q))
	}
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatalf("check: %v %+v", err, rep)
	}
	if rep.Trials != 300 || rep.Studies != 3 || rep.Fronts != 5 {
		t.Errorf("check report %+v", rep)
	}
}

func TestHistory(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "", false)
	r := rand.New(rand.NewPCG(4, 5))
	a, _ := s.EnsureStudy(ctx, testKey("llama", "H100-80GB", ""))
	kb := testKey("llama", "H100-80GB", "")
	kb.GPUCount = 2
	b, _ := s.EnsureStudy(ctx, kb)
	c, _ := s.EnsureStudy(ctx, testKey("llama", "A100-80GB", ""))
	for i := range 30 {
		runTrial(t, s, r, []store.Study{a, b, c}[i%3].ID)
	}
	if _, err := s.BeginTrial(ctx, a.ID, storetest.Config(r), store.BeginOptions{}); err != nil {
		t.Fatal(err)
	}
	h, err := s.History(ctx, store.HistoryQuery{Model: "llama", GPU: "H100-80GB"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 20 {
		t.Fatalf("history: %d trials, want 20 (running excluded)", len(h))
	}
	for i := 1; i < len(h); i++ {
		if h[i].Started.Before(h[i-1].Started) {
			t.Fatal("history not in start order")
		}
	}
	h2, _ := s.History(ctx, store.HistoryQuery{Model: "llama", GPU: "H100-80GB", GPUCount: 2, States: []store.State{store.StateOK}})
	for _, x := range h2 {
		if x.StudyID != b.ID || x.State != store.StateOK {
			t.Fatalf("filtered history holds %+v", x)
		}
	}
	if len(h2) == 0 {
		t.Fatal("no ok trials in history")
	}
}

func TestInterruptedRecovery(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tuner.db")
	a := openTest(t, path, false)
	st, _ := a.EnsureStudy(ctx, testKey("m", "g", ""))
	r := rand.New(rand.NewPCG(6, 7))
	tr, err := a.BeginTrial(ctx, st.ID, storetest.Config(r), store.BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A second writer while a is alive must leave a's running trial alone.
	b := openTest(t, path, false)
	if got, _ := b.Trial(ctx, tr.ID); got.State != store.StateRunning {
		t.Fatalf("live writer's trial became %s", got.State)
	}
	b.Close()
	a.Close() // releases a's session: from now on a is "dead"
	c := openTest(t, path, false)
	got, err := c.Trial(ctx, tr.ID)
	if err != nil || got.State != store.StateInterrupted || !strings.Contains(got.Notes, "interrupted") {
		t.Fatalf("dead writer's trial: %+v %v", got, err)
	}
	if _, err := c.FinishTrial(ctx, tr.ID, storetest.ResultOneIn(r, got.Config, 20)); !errors.Is(err, store.ErrState) {
		t.Errorf("finishing an interrupted trial: %v", err)
	}
	if _, err := c.Check(ctx); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(path + ".sessions")
	if len(entries) != 1 {
		t.Errorf("session files left: %d, want 1 (c's own)", len(entries))
	}
}

func TestModels(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "", false)
	data := []byte("tree\nversion=v3\n")
	meta := store.ModelMeta{Kind: "lightgbm-text", Schema: json.RawMessage(`{"features":["a","b"]}`), Metrics: map[string]float64{"rmse": 0.1}}
	if err := s.PutModel(ctx, "throughput", data, meta); err != nil {
		t.Fatal(err)
	}
	if err := s.PutModel(ctx, "vram", []byte("x"), store.ModelMeta{}); err != nil {
		t.Fatal(err)
	}
	got, m, err := s.GetModel(ctx, "throughput")
	if err != nil || !bytes.Equal(got, data) || m.Size != len(data) || m.Metrics["rmse"] != 0.1 || m.Created.IsZero() || string(m.Schema) != `{"features":["a","b"]}` {
		t.Fatalf("GetModel: %q %+v %v", got, m, err)
	}
	list, err := s.ListModels(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "throughput" {
		t.Fatalf("ListModels: %+v %v", list, err)
	}
	if err := s.DeleteModel(ctx, "vram"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetModel(ctx, "vram"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted model: %v", err)
	}
	if err := s.PutModel(ctx, "bad", nil, store.ModelMeta{Schema: json.RawMessage("{")}); err == nil {
		t.Error("invalid schema JSON accepted")
	}
}

func TestExport(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "", false)
	r := rand.New(rand.NewPCG(8, 9))
	a, _ := s.EnsureStudy(ctx, testKey("m", "g", ""))
	b, _ := s.EnsureStudy(ctx, testKey("m2", "g", ""))
	for i := range 10 {
		runTrial(t, s, r, []store.Study{a, b}[i%2].ID)
	}
	var buf bytes.Buffer
	if err := store.ExportJSONL(ctx, s, &buf, store.ExportQuery{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 10 {
		t.Fatalf("jsonl: %d lines", len(lines))
	}
	for _, l := range lines {
		if _, err := DecodeTrial([]byte(l)); err != nil {
			t.Fatalf("jsonl line does not decode: %v", err)
		}
	}
	buf.Reset()
	if err := store.ExportCSV(ctx, s, &buf, store.ExportQuery{StudyID: a.ID, Filter: store.TrialFilter{States: []store.State{store.StateOK}}}); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(buf.String()), "\n")
	header := strings.Split(rows[0], ",")
	if !slices.Contains(header, "param.max_num_seqs") || !slices.Contains(header, "tpot_p99") || header[0] != "study_id" {
		t.Errorf("csv header %v", header)
	}
	ok, _ := s.Trials(ctx, a.ID, store.TrialFilter{States: []store.State{store.StateOK}})
	if len(rows)-1 != len(ok) {
		t.Errorf("csv rows %d, want %d", len(rows)-1, len(ok))
	}
	for _, row := range rows[1:] {
		if n := len(strings.Split(row, ",")); n != len(header) {
			t.Fatalf("csv row has %d cells, header %d", n, len(header))
		}
	}
}

func TestBackup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, filepath.Join(dir, "tuner.db"), false)
	r := rand.New(rand.NewPCG(10, 11))
	st, _ := s.EnsureStudy(ctx, testKey("m", "g", ""))
	for range 20 {
		runTrial(t, s, r, st.ID)
	}
	dst := filepath.Join(dir, "backup.db")
	if err := os.WriteFile(dst, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Backup(ctx, dst); err != nil {
		t.Fatal(err)
	}
	if err := s.Backup(ctx, s.Path()); err == nil {
		t.Error("backup onto itself accepted")
	}
	b := openTest(t, dst, true)
	ts, err := b.Trials(ctx, st.ID, store.TrialFilter{})
	if err != nil || len(ts) != 20 {
		t.Fatalf("backup trials: %d %v", len(ts), err)
	}
	if _, err := b.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*.check-*")); len(m) != 0 {
		t.Errorf("check copies left: %v", m)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "backup.db.tmp-*"))
	if len(matches) != 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

func TestTimeoutWhenLocked(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tuner.db")
	s := openTest(t, path, false)
	// Hold the file the way a careless process would: open it read-write.
	ro, err := Open(ctx, path, Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	held := make(chan struct{})
	go func() {
		_ = s.update(ctx, func(*boltTx) error { close(held); <-hold; return nil })
	}()
	<-held
	_, err = ro.Studies(ctx)
	close(hold)
	if !errors.Is(err, store.ErrBusy) {
		t.Fatalf("read while a writer holds the file: %v, want ErrBusy", err)
	}
}

func TestFrontHelpers(t *testing.T) {
	f := store.Front{Objectives: store.DefaultObjectives(""), Points: []store.Point{
		{TrialID: "a", Values: []float64{100, 10, 70}},
		{TrialID: "b", Values: []float64{190, 12, 70}},
		{TrialID: "c", Values: []float64{200, 50, 70}},
	}}
	hv, err := f.Hypervolume([]float64{0, 100, 80})
	if err != nil {
		t.Fatal(err)
	}
	// Slab VRAM 70..80 (10) × 2-D area: 100·90 + 90·88 + 10·50 = 17420.
	if want := 10 * (100*90 + 90*88 + 10*50.0); hv != want {
		t.Errorf("hypervolume %v, want %v", hv, want)
	}
	if k, ok := f.Knee(); !ok || k.TrialID != "b" {
		t.Errorf("knee %v %v, want b", k.TrialID, ok)
	}
	if _, ok := (&store.Front{Objectives: f.Objectives}).Knee(); ok {
		t.Error("knee of an empty front")
	}
}

func TestStaleTemporariesRemoved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tuner.db")
	openTest(t, path, false).Close()
	old := time.Now().Add(-2 * time.Hour)
	stale := []string{path + ".new-0123", filepath.Join(dir, ".tuner.db.check-0123")}
	fresh := path + ".new-4567"
	for _, p := range append(stale, fresh) {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range stale {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	openTest(t, path, false)
	for _, p := range stale {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale %s not removed", p)
		}
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temporary removed: %v", err)
	}
}
