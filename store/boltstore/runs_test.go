package boltstore

import (
	"context"
	"errors"
	"github.com/vllm-tuner/tuner/bench"
	"github.com/vllm-tuner/tuner/store"
	"path/filepath"
	"testing"
	"time"
)

func TestRunsLifecycle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	s := openTest(t, path, false)
	mk := func(model, tier string, labels map[string]string) *store.Run {
		return &store.Run{Source: "run", Model: model, Tier: tier, Labels: labels, Matrix: "m", MatrixHash: "h", Start: time.Unix(100, 0).UTC()}
	}
	id1, err := s.BeginRun(ctx, mk("llama", "smoke", map[string]string{"git": "a"}))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := bench.EncodeRaw([]bench.Request{{Index: 1, Output: 2, TTFT: time.Millisecond, E2EL: 3 * time.Millisecond}})
	if err := s.AddCell(ctx, id1, store.CellResult{Name: "c1", Requests: 1}, raw); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, id1, store.RunOK, "", time.Unix(200, 0).UTC()); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCell(ctx, id1, store.CellResult{Name: "late"}, raw); !errors.Is(err, store.ErrRunState) {
		t.Errorf("cell after finish: %v", err)
	}
	id2, err := s.ImportRun(ctx, mk("qwen", "", nil), [][]byte{nil})
	if err != nil {
		t.Fatal(err)
	}
	if id1 != "r1" || id2 != "r2" {
		t.Errorf("ids %s %s", id1, id2)
	}
	r, err := s.Run(ctx, id1)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != store.RunOK || len(r.Cells) != 1 || r.Cells[0].RawKey != "r1/0" || r.Cells[0].RawBytes != len(raw) || r.Session != "" || r.V != store.RunVersion {
		t.Errorf("run %+v", r)
	}
	got, err := s.RunRaw(ctx, id1, 0)
	if err != nil || string(got) != string(raw) {
		t.Errorf("raw %v", err)
	}
	if _, err := s.RunRaw(ctx, id2, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("imported summary without raw data: %v", err)
	}
	if l, _ := s.Run(ctx, "latest"); l.ID != "r2" {
		t.Errorf("latest = %s", l.ID)
	}
	for _, bad := range []string{"r0", "r9", "x1", "", "r-1"} {
		if _, err := s.Run(ctx, bad); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Run(%q): %v", bad, err)
		}
	}
	tests := []struct {
		f    store.RunFilter
		want []string
	}{
		{store.RunFilter{}, []string{"r1", "r2"}},
		{store.RunFilter{Model: "qwen"}, []string{"r2"}},
		{store.RunFilter{Tier: "smoke"}, []string{"r1"}},
		{store.RunFilter{Labels: map[string]string{"git": "a"}}, []string{"r1"}},
		{store.RunFilter{Labels: map[string]string{"git": ""}}, []string{"r1"}},
		{store.RunFilter{Labels: map[string]string{"git": "b"}}, nil},
	}
	for _, tt := range tests {
		runs, err := s.Runs(ctx, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if len(ids) != len(tt.want) || (len(ids) > 0 && ids[0] != tt.want[0]) {
			t.Errorf("Runs(%+v) = %v, want %v", tt.f, ids, tt.want)
		}
		if tt.want == nil && runs != nil {
			t.Errorf("Runs(%+v) = %#v, want nil (JSON null)", tt.f, runs)
		}
	}
}

// A run whose writer died (its session lock released without FinishRun)
// reads as partial with the cells it finished; a live writer's run reads
// as running.
func TestRunWriterDied(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	w := openTest(t, path, false)
	id, err := w.BeginRun(ctx, &store.Run{Source: "run", Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddCell(ctx, id, store.CellResult{Name: "done"}, nil); err != nil {
		t.Fatal(err)
	}
	r := openTest(t, path, true)
	if got, _ := r.Run(ctx, id); got.State != store.RunRunning {
		t.Errorf("live writer: state %s, want running", got.State)
	}
	w.Close()
	got, err := r.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.RunPartial || len(got.Cells) != 1 {
		t.Errorf("dead writer: state %s with %d cells, want partial with 1", got.State, len(got.Cells))
	}
}
