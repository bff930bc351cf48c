package search

import (
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/spaces/spacestest"
	"github.com/vllm-tuner/tuner/trial"
)

// The incumbent at TP 8 moves to TP 4 x DP 2 with its other flags and its
// sequences shared by the replicas (the layout nearest in TP first), then
// to TP 2 x DP 4: one move per layout, whatever random draws ran there
// before; a layout with a feasible trial is left to the search, and one
// GPU has no other layout.
func TestRelayout(t *testing.T) {
	// Static pruning rules out TP 1 (the weights do not fit one GPU).
	sp, _ := Prune(testSpace(t, "Qwen2-72B", "H200-141GB", 8), nil, DefaultPruneOptions())
	cfg := func(tp, dp, seqs int) spaces.Config {
		c := spacestest.Normalized(t, sp, map[string]spaces.Value{
			"tensor_parallel_size":   spaces.IntValue(tp),
			"data_parallel_size":     spaces.IntValue(dp),
			"max_num_seqs":           spaces.IntValue(seqs),
			"max_num_batched_tokens": spaces.IntValue(2048),
			"kv_cache_dtype":         spaces.StringValue("fp8"),
		})
		if err := sp.Validate(c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	ok := func(thr float64) *trial.Result {
		m := trial.Metrics{Completed: 100, OutputThroughput: thr, TTFT: trial.Dist{P99: 500}, TPOT: trial.Dist{P99: 40}, ITL: trial.Dist{P99: 40}, E2EL: trial.Dist{P99: 9000}}
		return &trial.Result{Status: trial.StatusOK, Levels: []trial.Level{{Metrics: m}}, PeakVRAMGiB: 800}
	}
	slow := ok(3000)
	slow.Levels[0].Metrics.TPOT.P99 = 80 // misses the bound
	slo, err := trial.ParseSLO("tpot_p99<=50ms")
	if err != nil {
		t.Fatal(err)
	}
	pc := DefaultProposerConfig()
	pc.Space, pc.SLO = sp, slo
	pc.History = []Observation{
		{Config: cfg(8, 1, 128), Result: ok(3000)},
		{Config: cfg(8, 1, 256), Result: ok(3300)},                                          // the incumbent
		{Config: cfg(4, 2, 20).With("enforce_eager", spaces.BoolValue(true)), Result: slow}, // 4 x 2 met with poor flags
	}
	p := newProposer(t, pc)
	for _, want := range []struct {
		l    spaces.Layout
		seqs int
	}{{spaces.Layout{TP: 4, DP: 2}, 128}, {spaces.Layout{TP: 2, DP: 4}, 64}} {
		c, found := p.relayout(p.scalariser())
		if !found {
			t.Fatalf("no relayout, want %v", want.l)
		}
		if l := spaces.LayoutOf(c); l != want.l {
			t.Fatalf("relayout to %v, want %v", l, want.l)
		}
		if c.Int("max_num_seqs") != want.seqs || c.Str("kv_cache_dtype") != "fp8" || c.Int("max_num_batched_tokens") != 2048 {
			t.Fatalf("relayout to %v: %v, want the incumbent's flags with max_num_seqs %d", want.l, c, want.seqs)
		}
		p.Tell(c, slow)
	}
	// A new incumbent does not move again where a move was made.
	p.Tell(cfg(8, 1, 300), ok(3500))
	if c, found := p.relayout(p.scalariser()); found {
		t.Fatalf("relayout to %v after every layout had its move", spaces.LayoutOf(c))
	}

	// A layout with a feasible trial is the search's already.
	pc.History = append(pc.History, Observation{Config: cfg(4, 2, 32), Result: ok(1000)})
	q := newProposer(t, pc)
	if c, found := q.relayout(q.scalariser()); !found || spaces.LayoutOf(c) != (spaces.Layout{TP: 2, DP: 4}) {
		t.Fatalf("relayout %v (found %v), want 2x4 only", c, found)
	}

	one := DefaultProposerConfig()
	one.Space = h100(t)
	one.History = []Observation{{Config: one.Space.DefaultConfig(), Result: ok(3000)}}
	r := newProposer(t, one)
	if c, found := r.relayout(r.scalariser()); found {
		t.Fatalf("relayout on one GPU: %v", c)
	}
}
