package search

import (
	"context"
	"math"
	"testing"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/spaces/spacestest"
	"github.com/vllm-tuner/tuner/trial"
)

func testTarget(t testing.TB, model, gpu string, n int) spaces.Target {
	t.Helper()
	tg, err := spaces.DefaultCatalog().Target(model, gpu, n)
	if err != nil {
		t.Fatal(err)
	}
	tg.MaxModelLen = 8192
	return tg
}

func testSpace(t testing.TB, model, gpu string, n int) *spaces.Space {
	t.Helper()
	s, err := spaces.Default()
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(testTarget(t, model, gpu, n))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func h100(t testing.TB) *spaces.Space { return testSpace(t, "Llama-3.1-8B", "H100-80GB", 1) }

// synth is a deterministic analytic stand-in for an engine: throughput grows
// with the batch and the token budget and saturates, latency grows with the
// batch, VRAM is util x HBM, and utilisation above 0.95 runs out of memory.
// It has a real trade-off, a failure region and dominated levels
// (enforce_eager, block_size 8), so search and pruning have something to find.
func synth(c spaces.Config) *trial.Result {
	util := c.Float("gpu_memory_utilization")
	if util > 0.95 {
		return &trial.Result{Config: c, Status: trial.StatusFailed, Failure: trial.FailOOM, Error: "CUDA out of memory"}
	}
	seqs := float64(c.Int("max_num_seqs"))
	tok := float64(c.Int("max_num_batched_tokens"))
	kv := (util - 0.6) * 1000 // KV capacity in sequences, roughly
	if c.Str("kv_cache_dtype") == "fp8" {
		kv *= 1.8
	}
	batch := math.Min(seqs, kv)
	thr := 4000 * (1 - math.Exp(-batch/150)) * (1 - math.Exp(-tok/3000))
	if c.Bool("enforce_eager") {
		thr *= 0.7
	}
	if c.Int("block_size") == 8 {
		thr *= 0.9
	}
	if c.Bool("enable_prefix_caching") {
		thr *= 1.05
	}
	tpot := 8 + batch/40 + 2000/tok
	if c.Bool("enforce_eager") {
		tpot *= 1.3
	}
	ttft := 50 + tok/40 + seqs/10
	m := trial.Metrics{
		Completed: 100, OutputThroughput: thr,
		TTFT: trial.Dist{P99: ttft, Median: ttft / 2},
		TPOT: trial.Dist{P99: tpot, Median: tpot / 1.5},
		ITL:  trial.Dist{P99: tpot * 1.2},
		E2EL: trial.Dist{P99: ttft + 256*tpot},
	}
	return &trial.Result{
		Config: c, ConfigID: c.ID(), Status: trial.StatusOK,
		Levels: []trial.Level{{Metrics: m}}, PeakVRAMGiB: util * 80,
	}
}

// oracle is a Scorer that knows synth (noise-free), for screening tests.
type oracle struct{ objs pareto.Objectives }

func (o oracle) Score(_ context.Context, cands []spaces.Config) ([]Prediction, error) {
	out := make([]Prediction, len(cands))
	for i, c := range cands {
		r := synth(c)
		if !r.Usable() {
			out[i] = Prediction{Mean: make([]float64, len(o.objs)), Std: make([]float64, len(o.objs))}
			continue
		}
		p := Prediction{PFeasible: 1}
		for _, ob := range o.objs {
			v, _ := r.Objective(ob.Name)
			p.Mean = append(p.Mean, v)
			p.Std = append(p.Std, 0)
		}
		out[i] = p
	}
	return out, nil
}

// hvOf is the hypervolume of the feasible observations of the history in
// the objectives' own units against ref.
func hvOf(t testing.TB, hist []Observation, objs pareto.Objectives, slo trial.SLO, ref []float64) float64 {
	t.Helper()
	var pts [][]float64
	for _, o := range hist {
		if e := evaluate(o, objs, slo); e.feasible {
			pts = append(pts, e.vals)
		}
	}
	hv, err := pareto.Hypervolume(pts, objs.Directions(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return hv
}

// runProposer asks and tells n trials of synth (or run when given).
func runProposer(t testing.TB, p *Proposer, n int, run func(spaces.Config) *trial.Result) []spaces.Config {
	t.Helper()
	if run == nil {
		run = synth
	}
	var out []spaces.Config
	for range n {
		c, err := p.Ask(context.Background())
		if err != nil {
			t.Fatalf("ask %d: %v", len(out), err)
		}
		p.Tell(c, run(c))
		out = append(out, c)
	}
	return out
}

// searchHV runs a proposer of cfg for n trials (synth, or run when given)
// and returns hvOf its history against ref, in cfg's objectives and SLO.
func searchHV(t testing.TB, cfg ProposerConfig, n int, run func(spaces.Config) *trial.Result, ref []float64) float64 {
	t.Helper()
	p := newProposer(t, cfg)
	runProposer(t, p, n, run)
	return hvOf(t, p.History(), cfg.Objectives, cfg.SLO, ref)
}

func newProposer(t testing.TB, cfg ProposerConfig) *Proposer {
	t.Helper()
	p, err := NewProposer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// weaklyDominated reports whether a member of front (minimisation space) is
// no worse than y in every coordinate.
func weaklyDominated(front [][]float64, y []float64) bool {
	for _, f := range front {
		worse := false
		for j, v := range f {
			if v > y[j] {
				worse = true
				break
			}
		}
		if !worse {
			return true
		}
	}
	return false
}

// ttftBound is a synthetic engine whose best config sits at a TTFT bound:
// fewer sequences lower TPOT and raise TTFT (clients wait for a slot), so
// under ttft_p99<=1000ms the bound is at 86 sequences. cfg gives the config
// at a max_num_seqs (fp8, 4096 batched tokens, utilisation 0.7); the other
// values change nothing.
type ttftBound struct {
	t   testing.TB
	sp  *spaces.Space
	slo trial.SLO
}

func newTTFTBound(t testing.TB) ttftBound {
	slo, err := trial.ParseSLO("ttft_p99<=1000ms")
	if err != nil {
		t.Fatal(err)
	}
	return ttftBound{t, h100(t), slo}
}

func (b ttftBound) ttft(seqs int) float64 {
	if seqs < 96 {
		return 400 + float64(96-seqs)*60
	}
	return 400
}

func (b ttftBound) tpot(seqs int) float64 { return 10 + float64(seqs)/10 }

func (b ttftBound) cfg(seqs int) spaces.Config {
	return spacestest.Normalized(b.t, b.sp, map[string]spaces.Value{
		"max_num_seqs":           spaces.IntValue(seqs),
		"max_num_batched_tokens": spaces.IntValue(4096),
		"gpu_memory_utilization": spaces.FloatValue(0.7),
		"kv_cache_dtype":         spaces.StringValue("fp8"),
	})
}

func (b ttftBound) result(seqs int) *trial.Result {
	ttft, tpot := b.ttft(seqs), b.tpot(seqs)
	m := trial.Metrics{Completed: 100, OutputThroughput: 4000,
		TTFT: trial.Dist{P99: ttft}, TPOT: trial.Dist{P99: tpot}, ITL: trial.Dist{P99: tpot}, E2EL: trial.Dist{P99: ttft + 200*tpot}}
	return &trial.Result{Status: trial.StatusOK, Levels: []trial.Level{{Metrics: m}}, PeakVRAMGiB: 56}
}
