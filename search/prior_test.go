package search

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
)

// trainPrior trains a surrogate on n random synth trials scaled by scale
// (throughput) as a model trained elsewhere would be.
func trainPrior(t *testing.T, sc *SurrogateScorer, n int, scale float64) *surrogate.Surrogate {
	t.Helper()
	s := h100(t)
	run := func(c spaces.Config) *trial.Result {
		r := synth(c)
		if r.Usable() {
			r.Levels[0].Metrics.OutputThroughput *= scale
		}
		return r
	}
	hist := randomHistory(t, s, n, 99, run)
	var samples []surrogate.Sample
	for _, o := range hist {
		samples = append(samples, surrogate.Sample{Target: sc.target, Workload: sc.workload, Config: o.Config, Result: o.Result})
	}
	m, err := surrogate.Train(sc.schema, samples, sc.opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPriorScoresBeforeOwnHistoryAndFades(t *testing.T) {
	s := h100(t)
	slo := trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 40}}
	objs := store.DefaultObjectives("")
	sc, err := NewSurrogateScorer(s, smokeWorkload(), objs, slo, surrogate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cands []spaces.Config
	for _, o := range randomHistory(t, s, 40, 5, synth) {
		cands = append(cands, o.Config)
	}
	if _, err := sc.Score(context.Background(), cands); !errors.Is(err, ErrNotFitted) {
		t.Fatalf("no model, no prior: err %v, want ErrNotFitted", err)
	}
	// A prior that believes throughput is 3x what this study measures.
	if err := sc.SetPrior(trainPrior(t, sc, 150, 3), 8, s); err != nil {
		t.Fatal(err)
	}
	meanRatio := func() float64 { return throughputRatio(t, sc, cands) }
	r0 := meanRatio()
	t.Logf("prior alone: predicted/true throughput %.2f", r0)
	if r0 < 2 || r0 > 4.5 {
		t.Fatalf("prior alone predicts %.2fx the truth, want about 3x", r0)
	}
	// One own trial: training fails for want of data and the prior scores alone.
	if err := sc.Fit(context.Background(), randomHistory(t, s, 1, 6, synth)); err != nil {
		t.Fatalf("fit on one trial with a prior: %v", err)
	}
	prev := r0
	for _, n := range []int{8, 40} {
		if err := sc.Fit(context.Background(), randomHistory(t, s, n, 7, synth)); err != nil {
			t.Fatal(err)
		}
		r := meanRatio()
		t.Logf("%d own trials: predicted/true throughput %.2f", n, r)
		if r >= prev {
			t.Fatalf("with %d own trials the prediction is %.2fx the truth, was %.2fx: the prior does not fade", n, r, prev)
		}
		prev = r
	}
	if prev > 1.6 {
		t.Fatalf("with 40 own trials (prior weight 8) the prediction is still %.2fx the truth", prev)
	}
}

func TestPriorSchemaMismatch(t *testing.T) {
	s := h100(t)
	sc, err := NewSurrogateScorer(s, smokeWorkload(), store.DefaultObjectives(""), nil, surrogate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := trainPrior(t, sc, 60, 1)
	bad := *m.Schema
	bad.Features = append(append([]surrogate.Feature(nil), bad.Features...), surrogate.Feature{Name: "no_such_flag", Kind: surrogate.KindNum, Source: "param:no_such_flag"})
	m.Schema = &bad
	err = sc.SetPrior(m, 0, s)
	if !errors.Is(err, ErrPriorSchema) {
		t.Fatalf("err %v, want ErrPriorSchema", err)
	}
	if want := `parameter "no_such_flag"`; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}
