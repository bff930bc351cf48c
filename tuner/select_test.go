package tuner

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

const eps = 1e-12

func TestRobust(t *testing.T) {
	tests := []struct {
		xs          []float64
		median, mad float64
	}{
		{[]float64{5}, 5, 0},
		{[]float64{1, 2, 3}, 2, 1},
		{[]float64{100, 101, 160}, 101, 1}, // one lucky run barely moves it
		{[]float64{4, 1, 3, 2}, 2.5, 1},
		{[]float64{1, 1, 2, 2, 4, 6, 9}, 2, 1}, // |x-2| = 1 1 0 0 2 4 7
	}
	for _, tt := range tests {
		s := Robust(tt.xs)
		if math.Abs(s.Median-tt.median) > eps || math.Abs(s.MAD-tt.mad) > eps || s.N != len(tt.xs) {
			t.Errorf("Robust(%v) = %+v, want median %g MAD %g", tt.xs, s, tt.median, tt.mad)
		}
	}
	if s := Robust(nil); !math.IsNaN(s.Median) || s.N != 0 {
		t.Errorf("Robust(nil) = %+v", s)
	}
	if got := (Stat{Median: 10, MAD: 2}).Low(1.5); got != 7 {
		t.Errorf("Low = %g, want 7", got)
	}
}

// mkTrial is stored trial seq (0: search, >0: that re-measurement round) of
// config n.
func mkTrial(seq, n, repeat int, r trial.Result) store.Trial {
	c := cfgN(n)
	return store.Trial{Seq: uint64(seq), Repeat: repeat, State: store.StateOf(&r), Config: c, ConfigID: c.ID(), Result: &r}
}

func TestAggregateConservative(t *testing.T) {
	slo, _ := trial.ParseSLO("tpot_p99<=50ms")
	trials := []store.Trial{
		mkTrial(0, 1, 0, result(trial.StatusOK, 1000, 40, 70)),
		mkTrial(1, 2, 0, result(trial.StatusOK, 1500, 45, 70)), // lucky
		mkTrial(2, 2, 1, result(trial.StatusOK, 1100, 49, 70)),
		mkTrial(3, 2, 2, result(trial.StatusOK, 1050, 52, 70)),
		mkTrial(4, 3, 0, trial.Result{Status: trial.StatusFailed, Failure: trial.FailOOM}),
		{Seq: 5, State: store.StateInterrupted, Config: cfgN(4), ConfigID: cfgN(4).ID(), Result: &trial.Result{Status: trial.StatusFailed, Failure: trial.FailInterrupted}},
	}
	c := Aggregate(trials, slo, DefaultMetrics(), 1)
	if len(c) != 3 {
		t.Fatalf("%d candidates, want 3 (interrupted trials ignored)", len(c))
	}
	// Config 2: throughput 1500,1100,1050 -> median 1100, MAD 50, score 1050;
	// tpot 45,49,52 -> median 49, MAD 3, conservative 52 > 50: infeasible.
	c2 := c[1]
	if c2.Score != 1050 || c2.ConservativeLatency != 52 || c2.Feasible || len(c2.Trials) != 3 {
		t.Fatalf("config 2: %+v", c2)
	}
	if !strings.Contains(strings.Join(c2.Violations, ","), "tpot_p99=52") {
		t.Fatalf("config 2 violations %v", c2.Violations)
	}
	if c[2].Feasible || c[2].Failed != 1 || c[2].Failure != trial.FailOOM || len(c[2].Trials) != 0 {
		t.Fatalf("failed config: %+v", c[2])
	}
	rec, err := Recommend(c, DefaultMetrics(), slo, PreferThroughput)
	if err != nil || rec.ConfigID != cfgN(1).ID() {
		t.Fatalf("Recommend = %+v, %v; want config 1", rec, err)
	}
	// With a tighter SLO nothing fits; the closest is config 1 (40 vs 30).
	tight, _ := trial.ParseSLO("tpot_p99<=30ms")
	c = Aggregate(trials, tight, DefaultMetrics(), 1)
	_, err = Recommend(c, DefaultMetrics(), tight, PreferThroughput)
	var ie *InfeasibleError
	if !errors.As(err, &ie) || !errors.Is(err, ErrNoFeasible) || ie.Closest == nil || ie.Closest.ConfigID != cfgN(1).ID() {
		t.Fatalf("tight SLO: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "tpot_p99<=30ms") || !strings.Contains(msg, "trial 0") || !strings.Contains(msg, "tpot_p99=40 ms (want <= 30 ms)") {
		t.Fatalf("message %q", msg)
	}
}

func TestRecommendPreferences(t *testing.T) {
	// (throughput, tpot, vram) per config n.
	pts := map[int][3]float64{
		1: {1000, 20, 40}, // lowest VRAM
		2: {2000, 30, 70}, // highest throughput
		3: {1200, 10, 70}, // lowest latency
		4: {1900, 22, 50}, // knee-ish
		5: {500, 40, 75},  // dominated
	}
	var trials []store.Trial
	for i := 1; i <= 5; i++ {
		p := pts[i]
		trials = append(trials, mkTrial(i, i, 0, result(trial.StatusOK, p[0], p[1], p[2])))
	}
	c := Aggregate(trials, nil, DefaultMetrics(), 1)
	want := map[Prefer]int{PreferThroughput: 2, PreferLatency: 3, PreferVRAM: 1, PreferKnee: 4}
	for pref, n := range want {
		got, err := Recommend(c, DefaultMetrics(), nil, pref)
		if err != nil || got.Config.Int("max_num_seqs") != n {
			t.Errorf("prefer %s: got %v (%v), want config %d", pref, got, err, n)
		}
	}
	front := Front(c, DefaultMetrics())
	if len(front) != 4 {
		t.Errorf("front %v, want the 4 non-dominated configs", front)
	}
	if _, err := ParsePrefer("speed"); err == nil {
		t.Error("ParsePrefer accepted speed")
	}
}

// Property: no front member is dominated by any feasible candidate, and every
// feasible candidate off the front is dominated by a front member.
func TestFrontProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	m := DefaultMetrics()
	dirs := m.Objectives().Directions()
	slo, _ := trial.ParseSLO("tpot_p99<=50ms")
	for iter := 0; iter < 200; iter++ {
		var trials []store.Trial
		for i := range 1 + r.IntN(30) {
			trials = append(trials, mkTrial(i, r.IntN(20), 0,
				result(trial.StatusOK, float64(r.IntN(50)), float64(r.IntN(80)), float64(r.IntN(5)))))
		}
		c := Aggregate(trials, slo, m, 1)
		front := Front(c, m)
		on := map[int]bool{}
		for _, i := range front {
			on[i] = true
			if !c[i].Feasible {
				t.Fatalf("infeasible candidate %d on the front", i)
			}
		}
		for i := range c {
			if !c[i].Feasible {
				continue
			}
			dominated := false
			for j := range c {
				if c[j].Feasible && pareto.Dominates(c[j].Vector(), c[i].Vector(), dirs) {
					dominated = true
					if on[i] {
						t.Fatalf("front member %d dominated by %d", i, j)
					}
				}
			}
			if !dominated && !on[i] {
				t.Fatalf("non-dominated feasible candidate %d missing from the front", i)
			}
		}
	}
}

func TestStateOf(t *testing.T) {
	tests := []struct {
		r    *trial.Result
		want store.State
	}{
		{nil, store.StateInterrupted},
		{&trial.Result{Status: trial.StatusOK}, store.StateOK},
		{&trial.Result{Status: trial.StatusUnstable}, store.StateUnstable},
		{&trial.Result{Status: trial.StatusFailed, Failure: trial.FailOOM}, store.StateFailed},
		{&trial.Result{Status: trial.StatusFailed, Failure: trial.FailInterrupted}, store.StateInterrupted},
	}
	for _, tt := range tests {
		if got := store.StateOf(tt.r); got != tt.want {
			t.Errorf("store.StateOf(%+v) = %s, want %s", tt.r, got, tt.want)
		}
	}
}

func BenchmarkAggregate1k(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var trials []store.Trial
	for i := range 1000 {
		trials = append(trials, mkTrial(i, r.IntN(400), 0,
			result(trial.StatusOK, r.Float64()*5000, r.Float64()*80, 40+r.Float64()*30)))
	}
	slo, _ := trial.ParseSLO("tpot_p99<=50ms")
	b.ResetTimer()
	for b.Loop() {
		c := Aggregate(trials, slo, DefaultMetrics(), 1)
		if _, err := Recommend(c, DefaultMetrics(), slo, PreferKnee); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRecommendMeasuredPrefersRepeats(t *testing.T) {
	trials := []store.Trial{
		mkTrial(0, 1, 0, result(trial.StatusOK, 1000, 20, 70)),
		mkTrial(1, 1, 1, result(trial.StatusOK, 990, 20, 70)),
		mkTrial(2, 2, 0, result(trial.StatusOK, 1200, 20, 70)), // one lucky run
	}
	c := Aggregate(trials, nil, DefaultMetrics(), 1)
	got, err := RecommendMeasured(c, DefaultMetrics(), nil, PreferThroughput)
	if err != nil || got.Config.Int("max_num_seqs") != 1 {
		t.Fatalf("RecommendMeasured = %+v, %v; want the re-measured config 1", got, err)
	}
	got, err = RecommendMeasured(c[1:], DefaultMetrics(), nil, PreferThroughput)
	if err != nil || got.Config.Int("max_num_seqs") != 2 {
		t.Fatalf("without repeats: %+v, %v; want config 2", got, err)
	}
}

// TestRecommendMeasuredAcrossStudies is issue 13's case: vLLM's default ran
// first in each of two studies (two search runs, median of 2) and a config
// 6.2% faster ran once; the default's two runs are not a re-measurement, so
// the faster config wins.
func TestRecommendMeasuredAcrossStudies(t *testing.T) {
	trials := []store.Trial{
		mkTrial(0, 128, 0, result(trial.StatusOK, 2480, 20, 70)), // study A, trial 0
		mkTrial(1, 200, 0, result(trial.StatusOK, 2636, 21, 70)), // study A
		mkTrial(0, 128, 0, result(trial.StatusOK, 2484, 20, 70)), // study B, trial 0
	}
	slo, _ := trial.ParseSLO("tpot_p99<=50ms")
	c := Aggregate(trials, slo, DefaultMetrics(), 1)
	got, err := RecommendMeasured(c, DefaultMetrics(), slo, PreferThroughput)
	if err != nil || got.Config.Int("max_num_seqs") != 200 {
		t.Fatalf("RecommendMeasured = %+v, %v; want the faster config 200", got, err)
	}
	if c[0].Throughput.N != 2 || c[0].Remeasured != 0 || len(c[0].Runs) != 2 {
		t.Fatalf("default aggregated as %+v; want 2 runs, none a re-measurement", c[0])
	}
}

// FuzzRobust: the median lies within the data, the MAD is >= 0 and at most
// the range, and the conservative bounds bracket the median.
func FuzzRobust(f *testing.F) {
	f.Add(1.0, 2.0, 3.0, 1.5)
	f.Add(-5.0, 100.0, 100.0, 0.0)
	f.Fuzz(func(t *testing.T, a, b, c, k float64) {
		xs := []float64{a, b, c}
		for _, x := range append(xs, k) {
			if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 1e150 {
				t.Skip()
			}
		}
		k = math.Abs(k)
		s := Robust(xs)
		lo, hi := min(a, b, c), max(a, b, c)
		if s.Median < lo || s.Median > hi || s.MAD < 0 || s.MAD > hi-lo {
			t.Fatalf("Robust(%v) = %+v", xs, s)
		}
		if s.Low(k) > s.Median || s.High(k) < s.Median {
			t.Fatalf("bounds %g %g around %g", s.Low(k), s.High(k), s.Median)
		}
	})
}
