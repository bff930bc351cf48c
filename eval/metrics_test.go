package eval

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/store"
)

func TestQuantile(t *testing.T) {
	for _, tc := range []struct {
		xs          []float64
		med, q1, q3 float64
	}{
		{[]float64{3, 1, 2}, 2, 1.5, 2.5},
		{[]float64{4, 1, 3, 2}, 2.5, 1.75, 3.25},
		{[]float64{7}, 7, 7, 7},
		{[]float64{1, math.NaN(), 3}, 2, 1.5, 2.5},
	} {
		q := quantiles(tc.xs)
		if math.Abs(q.Median-tc.med) > 1e-12 || math.Abs(q.Q1-tc.q1) > 1e-12 || math.Abs(q.Q3-tc.q3) > 1e-12 {
			t.Errorf("quantiles(%v) = %+v, want %v/%v/%v", tc.xs, q, tc.med, tc.q1, tc.q3)
		}
	}
	if q := quantiles(nil); !math.IsNaN(q.Median) || q.N != 0 {
		t.Errorf("quantiles(nil) = %+v", q)
	}
}

// TestCurveProperties checks on random trial sequences that the HV ratio
// curve is non-decreasing, inside [0, 1], and reaches 1 exactly when the
// true front itself is tried.
func TestCurveProperties(t *testing.T) {
	p := &Problem{Objectives: store.DefaultObjectives("tpot_p99")}
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 200 {
		n := 1 + r.IntN(30)
		var trials []Trial
		var all [][]float64
		for k := 1; k <= n; k++ {
			v := []float64{r.Float64() * 100, r.Float64() * 50, 50 + r.Float64()*30}
			feas := r.Float64() < 0.7
			if feas {
				all = append(all, v)
			}
			trials = append(trials, Trial{Number: k, Phase: PhaseSearch, True: Truth{Vec: v, Feasible: feas}})
		}
		if len(all) == 0 {
			continue
		}
		ref := []float64{0, 60, 90}
		trueHV, err := pareto.Hypervolume(all, p.Objectives.Directions(), ref)
		if err != nil || trueHV <= 0 {
			t.Fatal(err, trueHV)
		}
		c := curve(trials, n, p, ref, trueHV)
		for i := range c {
			if c[i] < 0 || c[i] > 1 || (i > 0 && c[i] < c[i-1]-1e-12) {
				t.Fatalf("iter %d: curve %v not monotone in [0,1]", iter, c)
			}
		}
		if math.Abs(c[n-1]-1) > 1e-9 {
			t.Fatalf("iter %d: the whole set must reach ratio 1, got %v", iter, c[n-1])
		}
		if k := trialsTo(c, 1); k == 0 || k > n {
			t.Fatalf("iter %d: trialsTo = %d", iter, k)
		}
	}
}

// TestCheckpoints: the tabulated trial counts are those within the run,
// sorted, without repeats, ending at the run's length.
func TestCheckpoints(t *testing.T) {
	tests := []struct {
		trials int
		in     []int
		want   []int
	}{
		{48, []int{8, 16, 24, 48}, []int{8, 16, 24, 48}},
		{48, []int{8, 16, 24, 48, 48}, []int{8, 16, 24, 48}},
		{24, []int{8, 16, 24, 48}, []int{8, 16, 24}},
		{30, []int{24, 8}, []int{8, 24, 30}},
		{5, nil, []int{5}},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		c.Trials, c.Checkpoints = tt.trials, tt.in
		if err := c.validate(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.Checkpoints, tt.want) {
			t.Errorf("trials %d, checkpoints %v: got %v, want %v", tt.trials, tt.in, c.Checkpoints, tt.want)
		}
	}
}

func TestGPUHoursTo(t *testing.T) {
	trials := []Trial{
		{Number: 1, Phase: PhaseSearch, GPUSeconds: 1800},
		{Number: 2, Phase: PhaseSearch, GPUSeconds: 3600},
		{Number: 3, Phase: PhaseSearch, GPUSeconds: 7200},
		{Phase: PhaseRepeat, GPUSeconds: 3600},
	}
	curve := []float64{0.5, 0.85, 0.92}
	for _, tc := range []struct {
		thr   float64
		hours float64
		ok    bool
	}{
		{0.80, 1.5, true}, // trials 1-2
		{0.90, 3.5, true}, // trials 1-3, not the repeat
		{0.95, 0, false},
	} {
		h, ok := gpuHoursTo(trials, curve, tc.thr)
		if ok != tc.ok || math.Abs(h-tc.hours) > 1e-9 {
			t.Errorf("to %.2f: %.3f h, %v; want %.3f h, %v", tc.thr, h, ok, tc.hours, tc.ok)
		}
	}
}

// A screened-out config (tuner-sh) costs its short run's GPU time and adds
// nothing to the HV curve, even when it is truly on the front.
func TestScreenedOutCostsButIsNotFound(t *testing.T) {
	p := &Problem{Objectives: store.DefaultObjectives("tpot_p99")}
	ref := []float64{0, 100, 100}
	best := Truth{Feasible: true, Vec: []float64{100, 0, 0}}
	trials := []Trial{
		{Number: 1, Phase: PhaseSearch, GPUSeconds: 900, True: best, ScreenedOut: true},
		{Number: 2, Phase: PhaseSearch, GPUSeconds: 1800, True: Truth{Feasible: true, Vec: []float64{50, 0, 0}}},
		{Number: 3, Phase: PhaseSearch, GPUSeconds: 3600, True: best},
	}
	c := curve(trials, 3, p, ref, 100*100*100)
	if c[0] != 0 || math.Abs(c[1]-0.5) > 1e-9 || math.Abs(c[2]-1) > 1e-9 {
		t.Fatalf("curve %v, want [0 0.5 1]: the screened-out trial found nothing", c)
	}
	if h, ok := gpuHoursTo(trials, c, 0.9); !ok || math.Abs(h-1.75) > 1e-9 {
		t.Fatalf("GPU hours to 0.9: %.3f, %v; want 1.75 (the short run counted)", h, ok)
	}
}
