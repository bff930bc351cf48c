package tuner

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// TestLoopResumeFinishedStudy: the best config of the search measures lower
// when re-measured, below the runner-up's single run. A --resume of the
// finished study must run nothing (it re-measured the runner-up: two more
// trials per resume).
func TestLoopResumeFinishedStudy(t *testing.T) {
	st := &memStore{}
	cfg := testConfig(t)
	cfg.MaxTrials, cfg.Finalists, cfg.Repeats, cfg.Default = 2, 2, 3, spaces.Config{}
	runs := map[int]int{}
	eval := func(n, _ int) (trial.Result, error) {
		runs[n]++
		tp := 900.0 // n = 32: steady
		if n == 64 {
			tp = 1000 // lucky first run, then 500
			if runs[n] > 1 {
				tp = 500
			}
		}
		return result(trial.StatusOK, tp, 10, 70), nil
	}
	r1 := &fakeRunner{eval: eval}
	if _, err := mustLoop(t, cfg, r1, newListProposer(64, 32), st).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []int{64, 32, 64, 32, 64, 32, 64, 32}; len(r1.calls) != len(want) {
		t.Fatalf("first run calls %v, want %v", r1.calls, want)
	}
	cfg.Resume = true
	for i := range 2 {
		r := &fakeRunner{eval: eval}
		rep, err := mustLoop(t, cfg, r, newListProposer(64, 32), st).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.calls) != 0 || rep.RanThisRun != 0 || rep.RepeatTrials != 6 {
			t.Fatalf("resume %d of a finished study ran %v (report: %d this run, %d re-measurements)", i+1, r.calls, rep.RanThisRun, rep.RepeatTrials)
		}
	}
}

// TestLoopStopReasonNamesTheError: a store that cannot write ends the run
// with a stop reason that carries the error (it was empty).
func TestLoopStopReasonNamesTheError(t *testing.T) {
	for _, where := range []string{"begin", "finish"} {
		t.Run(where, func(t *testing.T) {
			cfg := testConfig(t)
			rep, err := mustLoop(t, cfg, &fakeRunner{eval: linearEval}, newListProposer(1, 2), &memStore{failOn: where}).Run(context.Background())
			if err == nil || errors.Is(err, context.Canceled) {
				t.Fatalf("err %v", err)
			}
			if !strings.HasPrefix(rep.StopReason, StopError+": ") || !strings.Contains(rep.StopReason, "disk full") {
				t.Fatalf("stop reason %q, want %q and the error", rep.StopReason, StopError)
			}
		})
	}
}
