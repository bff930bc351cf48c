package tuner

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

func crash(line string) trial.Result {
	return trial.Result{Status: trial.StatusFailed, Failure: trial.FailCrashed, Error: "engine crashed (exit 1): " + line + "\n  File x.py"}
}

// TestLoopEngineBroken: an engine that fails the same way before health
// whatever the config stops the search with ErrEngineBroken, and the
// search learns nothing from it; config-specific crashes are learned once
// an engine of the study ran.
func TestLoopEngineBroken(t *testing.T) {
	importErr := func(n, _ int) (trial.Result, error) {
		return crash(fmt.Sprintf("(EngineCore_DP0 pid=%d) ImportError: libcudart.so.12: cannot open shared object file", 100+n)), nil
	}
	tests := []struct {
		name       string
		list       []int
		eval       func(n, call int) (trial.Result, error)
		broken     bool
		runs, told int
		states     map[store.State]int
	}{
		{"default config first", []int{128, 1, 2}, importErr, true, 1, 0, map[store.State]int{store.StateInterrupted: 1}},
		{"three configs alike", []int{1, 2, 3, 4}, importErr, true, 3, 0, map[store.State]int{store.StateFailed: 2, store.StateInterrupted: 1}},
		{"crash during load", []int{128, 1}, func(n, c int) (trial.Result, error) {
			r := crash("EngineDeadError: EngineCore encountered an issue")
			r.Phases.MeasureS = 0.5 // healthy, then died in the first level
			return r, nil
		}, false, 2, 2, map[store.State]int{store.StateFailed: 2}},
		{"crash then health", []int{1, 2, 3}, func(n, c int) (trial.Result, error) {
			if n == 1 {
				return importErr(n, c)
			}
			return linearEval(n, c)
		}, false, 3, 3, map[store.State]int{store.StateFailed: 1, store.StateOK: 2}},
		{"different crashes", []int{1, 2, 3, 4}, func(n, c int) (trial.Result, error) {
			if n < 4 {
				return crash(fmt.Sprintf("AssertionError: case %c", 'a'+n)), nil
			}
			return linearEval(n, c)
		}, false, 4, 4, map[store.State]int{store.StateFailed: 3, store.StateOK: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Repeats, cfg.MaxTrials = 0, len(tt.list)
			st := &memStore{}
			r := &fakeRunner{eval: tt.eval}
			p := newListProposer(tt.list...)
			_, err := mustLoop(t, cfg, r, p, st).Run(context.Background())
			if got := errors.Is(err, ErrEngineBroken); got != tt.broken {
				t.Fatalf("Run err = %v, want broken %v", err, tt.broken)
			}
			told := 0
			for _, n := range p.told {
				told += n
			}
			trials, _ := st.Trials(context.Background())
			if len(r.calls) != tt.runs || told != tt.told {
				t.Errorf("runs %d told %d, want %d and %d", len(r.calls), told, tt.runs, tt.told)
			}
			if got := countStates(trials); fmt.Sprint(got) != fmt.Sprint(tt.states) {
				t.Errorf("states %v, want %v", got, tt.states)
			}
		})
	}
}
