package search

import (
	"math"
	"testing"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

func TestFixedRef(t *testing.T) {
	tg := testTarget(t, "Llama-3.1-70B", "H100-80GB", 4)
	objs := store.DefaultObjectives("tpot_p99")
	tests := []struct {
		name string
		slo  trial.SLO
		want []float64
	}{
		{"no SLO", nil, []float64{0, math.NaN(), tg.GPU.MemoryGiB * 4}},
		{"loosest latency bound", trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 40}, {Metric: "tpot_p99", Op: "<", Limit: 60}},
			[]float64{0, 60, tg.GPU.MemoryGiB * 4}},
		{"bound on another metric", trial.SLO{{Metric: "ttft_p99", Op: "<=", Limit: 500}}, []float64{0, math.NaN(), tg.GPU.MemoryGiB * 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := fixedRef(objs, tc.slo, &tg)
			for j := range tc.want {
				if !(got[j] == tc.want[j] || math.IsNaN(got[j]) && math.IsNaN(tc.want[j])) {
					t.Fatalf("ref %v, want %v", got, tc.want)
				}
			}
		})
	}
	if r := fixedRef(objs, nil, nil); !math.IsNaN(r[2]) {
		t.Fatalf("no target: VRAM ref %v, want NaN", r[2])
	}
}

// The normalised reference is never tighter than hvRef, and maps the raw
// point through the scalariser's normaliser.
func TestNormRef(t *testing.T) {
	objs := pareto.Objectives{{Name: "thr", Direction: pareto.Maximize}, {Name: "lat", Direction: pareto.Minimize}, {Name: "mem", Direction: pareto.Minimize}}
	norm := newNormaliser(objs, [][]float64{{1000, 10, 50}, {2000, 20, 60}})
	got := normRef([]float64{0, 15, math.NaN()}, norm)
	want := []float64{2, hvRef, hvRef} // throughput 0 is (0 + 2000) / 1000; latency 15 lies inside the range
	for j := range want {
		if math.Abs(got[j]-want[j]) > 1e-12 {
			t.Fatalf("normRef %v, want %v", got, want)
		}
	}
	if normRef(nil, norm) != nil {
		t.Fatal("nil raw ref gives a point")
	}
}

// With the fixed reference, a prediction at the low-memory end that the
// history's own range would not credit (it is worse in throughput than
// every trial) scores a gain.
func TestAcquisitionFixedRefValuesEnds(t *testing.T) {
	objs := pareto.Objectives{{Name: "thr", Direction: pareto.Maximize}, {Name: "mem", Direction: pareto.Minimize}}
	vecs := [][]float64{{2000, 70}, {1800, 60}}
	norm := newNormaliser(objs, vecs)
	sc := scalariser{norm: norm, weights: []float64{0.5, 0.5}}
	front := [][]float64{norm.apply(vecs[0]), norm.apply(vecs[1])}
	pred := []Prediction{{Mean: []float64{1000, 30}, Std: []float64{0, 0}, PFeasible: 1}}
	local := acquisition(pred, front, sc, 0, 1, nil, nil)
	fixed := acquisition(pred, front, sc, 0, 1, normRef([]float64{0, 80}, norm), nil)
	if local[0].hvi != 0 {
		t.Fatalf("local reference credits a point beyond its box: %v", local[0].hvi)
	}
	if fixed[0].hvi <= 0 {
		t.Fatalf("fixed reference gives no gain to the low-memory end: %v", fixed[0].hvi)
	}
}

// The feasibility exponent discounts a candidate's odds below certainty
// more than their expectation: a larger gain at even odds loses to a
// smaller one that will almost surely count.
func TestAcquisitionFeasibilityExponent(t *testing.T) {
	objs := pareto.Objectives{{Name: "thr", Direction: pareto.Maximize}, {Name: "mem", Direction: pareto.Minimize}}
	vecs := [][]float64{{2000, 70}, {1800, 60}}
	norm := newNormaliser(objs, vecs)
	sc := scalariser{norm: norm, weights: []float64{0.5, 0.5}}
	front := [][]float64{norm.apply(vecs[0]), norm.apply(vecs[1])}
	preds := []Prediction{
		{Mean: []float64{3000, 50}, Std: []float64{0, 0}, PFeasible: 0.5},  // more gain, even odds
		{Mean: []float64{2300, 50}, Std: []float64{0, 0}, PFeasible: 0.95}, // less gain, near certain
	}
	cases := []struct {
		kf   float64
		want int
	}{{1, 0}, {3, 1}}
	for _, c := range cases {
		if got := best(acquisition(preds, front, sc, 0, c.kf, nil, nil)); got != c.want {
			t.Errorf("exponent %v: best = %d, want %d", c.kf, got, c.want)
		}
	}
}
