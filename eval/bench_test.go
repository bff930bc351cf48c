package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestQuickHarness runs the CI variant twice with the same seed and checks
// that the harness works (files written, numbers in range, HV ratios in
// [0, 1], the second run served from the cache the first wrote, identical
// figures), not the figures themselves.
func TestQuickHarness(t *testing.T) {
	cfg := QuickConfig()
	if raceEnabled || testing.Short() {
		cfg.Trials, cfg.Checkpoints, cfg.PruneHistory = 6, []int{3, 6}, 6
		cfg.Plan = SamplePlan{Random: 60, Refine: 20, Seed: 11}
	}
	cfg.CacheDir = t.TempDir()
	cfg.WriteCache = true
	out1, out2 := t.TempDir(), t.TempDir()
	var prog bytes.Buffer
	cfg.Progress = &prog
	cfg.OutDir = out1
	t0 := time.Now()
	r1, err := Execute(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, prog.String())
	}
	t.Logf("first quick run: %v", time.Since(t0))
	cfg.OutDir = out2
	r2, err := Execute(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "report.json", "runs.json", "hv-" + cfg.Scenarios[0].Name + ".svg"} {
		b, err := os.ReadFile(filepath.Join(out1, f))
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: %v (%d bytes)", f, err, len(b))
		}
	}
	svg, _ := os.ReadFile(filepath.Join(out1, "hv-"+cfg.Scenarios[0].Name+".svg"))
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG does not parse: %v", err)
			}
			break
		}
	}
	var back Report
	b, _ := os.ReadFile(filepath.Join(out1, "report.json"))
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	md, _ := os.ReadFile(filepath.Join(out1, "report.md"))
	// One scenario: the prior strategy has nothing to train on and is left out.
	ran := slices.DeleteFunc(StrategyNames(), func(n string) bool { return n == StratPrior })
	for _, want := range append(ran, "## Goals", "Pruning quality", "GPU h to 0.80") {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if !r2.Scenarios[0].Cached || r1.Scenarios[0].Cached {
		t.Errorf("cache: first run cached=%v, second cached=%v; want false, true", r1.Scenarios[0].Cached, r2.Scenarios[0].Cached)
	}
	if len(r1.Summaries) != len(ran)*len(cfg.Scenarios) {
		t.Fatalf("%d summaries", len(r1.Summaries))
	}
	for _, s := range r1.Summaries {
		if len(s.Curve) != cfg.Trials {
			t.Errorf("%s: curve has %d points", s.Strategy, len(s.Curve))
		}
		for i, v := range s.Curve {
			if v < 0 || v > 1 || math.IsNaN(v) || (i > 0 && v < s.Curve[i-1]-1e-12) {
				t.Errorf("%s: median curve %v leaves [0,1] or decreases", s.Strategy, s.Curve)
				break
			}
		}
		for _, q := range []Quantiles{s.BestRatio, s.PickBestRatio} {
			if q.N > 0 && (q.Median < 0 || q.Median > 1+1e-9) {
				t.Errorf("%s: ratio %v outside [0,1]", s.Strategy, q)
			}
		}
		for _, k := range s.TrialsToThreshold {
			if k < 1 || k > cfg.Trials+1 {
				t.Errorf("%s: trials to threshold %d", s.Strategy, k)
			}
		}
		if s.GPUHours.Median <= 0 {
			t.Errorf("%s: no GPU hours", s.Strategy)
		}
		for k, q := range s.GPUHoursTo {
			if s.ReachedTo[k] > 0 && (q.Median <= 0 || q.Q1 > s.GPUHours.Q3+1e-9) {
				t.Errorf("%s: GPU hours to %s %v beyond the runs' GPU hours %v", s.Strategy, k, q, s.GPUHours)
			}
		}
	}
	for _, p := range r1.Pruning {
		for _, q := range []Quantiles{p.VolumeRemoved, p.FrontKept, p.HVKept} {
			if q.Median < 0 || q.Median > 1+1e-9 {
				t.Errorf("pruning %s: %v outside [0,1]", p.History, q)
			}
		}
	}
	if len(r1.Goals) == 0 {
		t.Error("no goals stated")
	}
	// Every tuner run recommends a config, judged on the other streams too.
	if s := r1.summary(cfg.Scenarios[0].Name, StratTuner); s == nil || s.PickStreams.N != cfg.Seeds || !(s.PickStreams.Median > 0) ||
		s.PickStreamsMet < 0 || s.PickStreamsMet > 1 || s.BestStreamsMet < 0 || s.BestStreamsMet > 1 ||
		s.HVStreams.N != cfg.Seeds || !(s.HVStreams.Median >= 0) {
		t.Errorf("tuner's pick on other request streams: %+v", s)
	}
	if !strings.Contains(string(md), "other request streams") {
		t.Error("report.md does not state the pick on other request streams")
	}
	// Deterministic for a seed: everything but wall-clock figures matches.
	strip := func(r *Report) string {
		c := *r
		c.WallS = 0
		c.Scenarios = append([]ScenarioReport(nil), r.Scenarios...)
		for i := range c.Scenarios {
			c.Scenarios[i].EvalMS, c.Scenarios[i].Cached = 0, false
		}
		b, _ := json.Marshal(c)
		return string(b)
	}
	if strip(r1) != strip(r2) {
		t.Error("two runs with the same seeds differ")
	}
}

// BenchmarkNoiseFreeEval measures one ground-truth evaluation (the figure
// the report's ms/eval column states) on the first scenario.
func BenchmarkNoiseFreeEval(b *testing.B) {
	p, err := DefaultScenarios()[0].Resolve()
	if err != nil {
		b.Fatal(err)
	}
	ev, err := NewEvaluator(p)
	if err != nil {
		b.Fatal(err)
	}
	cfg := p.Space.DefaultConfig()
	for b.Loop() {
		if _, err := ev.runner.Run(context.Background(), cfg, p.Workload); err != nil {
			b.Fatal(err)
		}
	}
}
