package surrogate

import (
	"math"
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

// TestScaled: before trees can be trained the model is the roofline, scaled
// by the geometric mean of the measured samples' ratios to it; P(feasible)
// is the Laplace-smoothed share of feasible samples.
func TestScaled(t *testing.T) {
	tg := mustTarget(t, "Llama-3.1-8B", "H100", 1)
	w := chatWorkload(60)
	ss := simSamples(t, tg, w, 12, 51, nil)
	var usable []Sample
	for _, s := range ss {
		if s.Result.Usable() {
			usable = append(usable, s)
		}
	}
	if len(usable) < 4 {
		t.Fatalf("%d usable samples of %d", len(usable), len(ss))
	}
	oom := &trial.Result{Config: ss[0].Config, Status: trial.StatusFailed, Failure: trial.FailOOM, Error: "CUDA out of memory"}
	ss = append(ss, Sample{Target: tg, Workload: w, Config: ss[0].Config, Result: oom})
	schema := NewSchema(resolved(t, tg))
	enc := schema.Encoder(tg, w)
	probe := usable[len(usable)-1] // predicted, never trained on
	for _, tc := range []struct {
		name    string
		samples []Sample
	}{
		{"no sample: the roofline", nil},
		{"one sample", usable[:1]},
		{"three samples", usable[:3]},
		{"every sample and a failure", ss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := BuildMatrix(schema, DefaultObjectives(), tc.samples)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Scaled(m, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			s = roundTrip(t, s)
			if s.Metrics.Origin != "scaled" || s.Metrics.Samples != len(tc.samples) {
				t.Errorf("metrics %+v", s.Metrics)
			}
			got := s.Predict([][]float64{enc.Encode(probe.Config)})[0]
			for k, o := range s.Objectives {
				b := o.baselineOf(s.Schema)
				est := math.Exp(b.logOf(enc.Encode(probe.Config)))
				var logRatio float64
				n := 0
				for _, smp := range tc.samples {
					if v, ok := smp.Result.Objective(o.Metric); ok && smp.Result.Usable() {
						logRatio += math.Log(v / math.Exp(b.logOf(enc.Encode(smp.Config))))
						n++
					}
				}
				if n > 0 {
					logRatio /= float64(n)
				}
				want := est * math.Exp(logRatio)
				if math.Abs(got.Mean[k]/want-1) > 1e-6 || got.Std[k] != 0 {
					t.Errorf("%s: predicted %v ± %v, want %v (roofline %v)", o.Name, got.Mean[k], got.Std[k], want, est)
				}
			}
			feasible := 0
			for _, smp := range tc.samples {
				if smp.Result.Usable() {
					feasible++
				}
			}
			wantP := 1.0 // no classifier without a sample
			if len(tc.samples) > 0 {
				wantP = (float64(feasible) + 1) / (float64(len(tc.samples)) + 2)
			}
			if math.Abs(got.PFeasible-wantP) > 1e-9 || s.HasClassifier() != (len(tc.samples) > 0) {
				t.Errorf("P(feasible) %v (classifier %v), want %v", got.PFeasible, s.HasClassifier(), wantP)
			}
		})
	}
}
