package main

import (
	"context"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// TestRecommendWarnsAboutHiddenFailures: a config whose runs failed 20% of
// their requests breaks the default error-rate bound and is not
// recommended; the config that is recommended had a few failed requests
// (allowed by --slo) and short outputs, and recommend says so on stderr.
func TestRecommendWarnsAboutHiddenFailures(t *testing.T) {
	ctx := context.Background()
	path, s := newTestDB(t)
	st, err := s.EnsureStudy(ctx, store.StudyKey{Model: "m", GPU: "H100-80GB", Engine: "sim", Workload: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range []trial.Metrics{
		{Completed: 80, Failed: 20, ErrorRate: 0.2, OutputThroughput: 2000, TPOT: trial.Dist{P99: 10}},
		{Completed: 97, Failed: 3, ErrorRate: 0.03, TokenMismatches: 5, OutputThroughput: 1000, TPOT: trial.Dist{P99: 20}},
	} {
		cfg := spaces.NewConfig(map[string]spaces.Value{"max_num_seqs": spaces.IntValue(64 << i)})
		tr, err := s.BeginTrial(ctx, st.ID, cfg, store.BeginOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res := &trial.Result{Config: cfg, Status: trial.StatusOK, PeakVRAMGiB: 70, Levels: []trial.Level{{Metrics: m}}}
		if _, err := s.FinishTrial(ctx, tr.ID, res); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	code, out, errb := runTuner(t, "--db", path, "recommend", "--model", "m")
	if code != 1 || !strings.Contains(errb, "error_rate") {
		t.Errorf("default error-rate bound: exit %d, stdout %q, stderr %q", code, out, errb)
	}
	code, out, errb = runTuner(t, "--db", path, "recommend", "--model", "m", "--slo", "error_rate<=5%")
	if code != 0 || !strings.Contains(out, "--max-num-seqs 128") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errb)
	}
	for _, want := range []string{"warning: config", "3 of 100 measured requests failed", "5 requests returned fewer output tokens"} {
		if !strings.Contains(errb, want) {
			t.Errorf("stderr %q lacks %q", errb, want)
		}
	}
}
