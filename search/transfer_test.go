package search

import (
	"context"
	"math"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
)

// asOtherStudy marks observations as another study's: weight 0.5 as tuner
// search gives them, with their context when given.
func asOtherStudy(hist []Observation, tg *spaces.Target, w *trial.Workload) []Observation {
	out := make([]Observation, len(hist))
	for i, o := range hist {
		o.Weight, o.Target, o.Workload = 0.5, tg, w
		out[i] = o
	}
	return out
}

// TestOtherContextWaitsForOwnTrials: until the study has OtherContextAfter
// measured trials of its own, another study's trials are left out of the
// surrogate's training. With 6 own trials, 150 of a study that measured 3x
// the throughput in a context the features cannot tell apart (another
// workload of the same target) made the surrogate predict 2.7x the truth.
func TestOtherContextWaitsForOwnTrials(t *testing.T) {
	s := h100(t)
	slo := trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 40}}
	tripled := func(c spaces.Config) *trial.Result {
		r := synth(c)
		if r.Usable() {
			r.Levels[0].Metrics.OutputThroughput *= 3
		}
		return r
	}
	var cands []spaces.Config
	for _, o := range randomHistory(t, s, 40, 5, synth) {
		cands = append(cands, o.Config)
	}
	tg, w := s.Target(), smokeWorkload()
	for _, tc := range []struct {
		name     string
		target   *spaces.Target
		w        *trial.Workload
		own      int
		min, max float64 // predicted/true throughput
	}{
		{"another study (tuner search: weight 0.5), 6 own trials", nil, nil, 6, 0.7, 1.8},
		{"named context (eval warm start), 6 own trials", tg, &w, 6, 0.7, 1.8},
		{"named context, 40 own trials: both learnt", tg, &w, 40, 1.4, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := NewSurrogateScorer(s, smokeWorkload(), store.DefaultObjectives(""), slo, surrogate.Options{})
			if err != nil {
				t.Fatal(err)
			}
			other := asOtherStudy(randomHistory(t, s, 150, 99, tripled), tc.target, tc.w)
			hist := append(randomHistory(t, s, tc.own, 7, synth), other...)
			if err := sc.Fit(context.Background(), hist); err != nil {
				t.Fatal(err)
			}
			r := throughputRatio(t, sc, cands)
			t.Logf("predicted/true throughput %.2f", r)
			if r < tc.min || r > tc.max {
				t.Fatalf("with %d own trials the surrogate predicts %.2fx the true throughput, want %.1f-%.1f", tc.own, r, tc.min, tc.max)
			}
		})
	}
}

// throughputRatio is the geometric mean of sc's predicted over synth's true
// throughput of the usable candidates.
func throughputRatio(t *testing.T, sc *SurrogateScorer, cands []spaces.Config) float64 {
	t.Helper()
	preds, err := sc.Score(context.Background(), cands)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	var n int
	for i, c := range cands {
		if r := synth(c); r.Usable() {
			sum += math.Log(preds[i].Mean[0] / r.Metrics().OutputThroughput)
			n++
		}
	}
	return math.Exp(sum / float64(n))
}

// fitCounter is a Scorer and Fitter that counts fits and scores with synth.
type fitCounter struct {
	oracle
	fits int
}

func (f *fitCounter) Fit(context.Context, []Observation) error { f.fits++; return nil }

// TestScreeningWaitsForOwnMeasurements: screening (and the surrogate's
// first fit) starts once the study has MinScreenHistory measurements of its
// own; another context's history does not count towards it. By default
// (0) the first ask after vLLM's default config is screened already.
func TestScreeningWaitsForOwnMeasurements(t *testing.T) {
	s := h100(t)
	objs := store.DefaultObjectives("")
	for _, tc := range []struct {
		name      string
		hist      []Observation
		minScreen int
		wantFits  bool // after the default and one more trial
	}{
		{"other context", asOtherStudy(randomHistory(t, s, 20, 3, synth), nil, nil), 2, false},
		{"own context", randomHistory(t, s, 20, 3, synth), 2, true},
		{"no history, the default threshold", nil, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &fitCounter{oracle: oracle{objs}}
			cfg := DefaultProposerConfig()
			cfg.Space, cfg.Seed, cfg.Objectives, cfg.Scorer, cfg.History = s, 1, objs, fc, tc.hist
			cfg.MinScreenHistory = tc.minScreen
			p := newProposer(t, cfg)
			runProposer(t, p, 2, nil)
			if got := fc.fits > 0; got != tc.wantFits {
				t.Fatalf("after 2 asks with %s history the scorer was fitted %d times, want fitted %v", tc.name, fc.fits, tc.wantFits)
			}
		})
	}
}
