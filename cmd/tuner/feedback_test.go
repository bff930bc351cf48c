package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/store"
)

// A search over a feedback workload stores each trial's trace; show prints
// the breakdown per window and the trace, and draws both.
func TestSearchFeedbackShow(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "fb.db")
	code, _, errb := runTuner(t, "--db", db, "search", "--model", testModel, "--gpu", testGPU, "--engine", "sim-virtual",
		"--workload", "testdata/tiny-feedback.yaml", "--trials", "2", "--budget", "0", "--finalists", "0")
	if code != 0 {
		t.Fatalf("search: exit %d\n%s", code, errb)
	}
	s := openTestStore(t, db)
	studies, err := s.Studies(context.Background())
	if err != nil || len(studies) != 1 {
		t.Fatalf("studies %v %v", studies, err)
	}
	trials, _ := s.Trials(context.Background(), studies[0].ID, store.TrialFilter{})
	s.Close()
	if len(trials) == 0 || trials[0].Result == nil || trials[0].Result.Feedback == nil {
		t.Fatalf("no feedback trace stored: %+v", trials)
	}
	r := trials[0].Result
	if r.Capacity != r.Feedback.Sustained || r.Capacity <= 4 || !r.Feedback.Bounded || len(r.Levels) != len(r.Feedback.Windows) {
		t.Errorf("trial: capacity %v, sustained %v, %d levels for %d windows", r.Capacity, r.Feedback.Sustained, len(r.Levels), len(r.Feedback.Windows))
	}
	id := trials[0].ID
	bars, trace := filepath.Join(dir, "b.svg"), filepath.Join(dir, "t.html")
	code, out, errb := runTuner(t, "--db", db, "show", "--plot", bars, "--trace", trace, id)
	if code != 0 {
		t.Fatalf("show: exit %d %s", code, errb)
	}
	for _, want := range []string{"feedback load: ttft_p95 <= 150 ms held at", "offered req/s", "hold", "where the time goes: queue"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	b, _ := os.ReadFile(bars)
	if n := bytes.Count(b, []byte("style=\"fill:#1F77B4\"")); n != len(r.Levels)+1 { // a prefill block per level, one in the legend
		t.Errorf("breakdown plot: %d prefill blocks for %d levels", n, len(r.Levels))
	}
	if h, _ := os.ReadFile(trace); !bytes.Contains(h, []byte("echarts")) || !bytes.Contains(h, []byte(id+" ttft_p95")) {
		t.Errorf("trace HTML lacks the series")
	}
	if code, _, errb := runTuner(t, "--db", db, "show", "--plot", "x.pdf", id); code != exitUsage || !strings.Contains(errb, ".svg") {
		t.Errorf("show --plot x.pdf: exit %d %s", code, errb)
	}
	// --slo replacing the workload's latency bound leaves feedback mode nothing to hold.
	code, _, errb = runTuner(t, "--db", db, "search", "--model", testModel, "--gpu", testGPU, "--engine", "sim-virtual",
		"--workload", "testdata/tiny-feedback.yaml", "--slo", "output_throughput>=100", "--trials", "1")
	if code != exitUsage || !strings.Contains(errb, "latency bound") {
		t.Errorf("feedback without a latency bound: exit %d %s", code, errb)
	}
}
