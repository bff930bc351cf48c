package search

import (
	"context"
	"fmt"
	"testing"

	"github.com/vllm-tuner/tuner/internal/benchcpu"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
)

// BenchmarkAsk measures one Ask with screening of 256 candidates (plus two
// refinement rounds) after 24 trials of history: with the oracle (the cost
// of the proposer itself) and with the real surrogate (refit every ask).
func BenchmarkAsk(b *testing.B) {
	slo := trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 40}}
	objs := store.DefaultObjectives("")
	for _, tc := range []struct {
		name   string
		scorer func(b *testing.B) Scorer
	}{
		{"oracle-256", func(*testing.B) Scorer { return oracle{objs: objs} }},
		{"surrogate-256", func(b *testing.B) Scorer {
			sc, err := NewSurrogateScorer(h100(b), smokeWorkload(), objs, slo, surrogate.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return sc
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := h100(b)
			hist := randomHistory(b, s, 23, 1, synth)
			def := s.DefaultConfig()
			hist = append(hist, Observation{Config: def, Result: synth(def)})
			p := newProposer(b, ProposerConfig{Space: s, Seed: 1, SLO: slo, Scorer: tc.scorer(b), Candidates: 256, History: hist})
			b.ResetTimer()
			for range b.N {
				c, err := p.Ask(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				p.mu.Lock()
				delete(p.pending, c.ID()) // keep the history fixed
				p.told = 1                // refit every ask
				p.mu.Unlock()
			}
		})
	}
}

// BenchmarkAskTellHistory measures the proposer's share of the loop's
// overhead per trial (Ask with the real surrogate on its real refit
// schedule, then Tell) with 24 to 10,000 trials of history (an overnight
// multi-worker study reaches thousands). cpu-ms/op is the process CPU time
// per Ask+Tell, which does not depend on the machine's load; the goal is
// <= 100 at 10,000. Run with -benchtime 20x: the first fit on a long
// history is outside the timer, refits on their schedule inside it (at
// 10,000 every 400 tells, on a screening ask: -benchtime 420x holds one).
func BenchmarkAskTellHistory(b *testing.B) {
	slo := trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 40}}
	objs := store.DefaultObjectives("")
	for _, n := range []int{24, 500, 2000, 10000} {
		b.Run(fmt.Sprintf("history-%d", n), func(b *testing.B) {
			s := h100(b)
			sc, err := NewSurrogateScorer(s, smokeWorkload(), objs, slo, surrogate.Options{})
			if err != nil {
				b.Fatal(err)
			}
			hist := randomHistory(b, s, n-1, 1, synth)
			def := s.DefaultConfig()
			hist = append(hist, Observation{Config: def, Result: synth(def)})
			p := newProposer(b, ProposerConfig{Space: s, Seed: 1, SLO: slo, Scorer: sc, History: hist})
			if _, err := p.Ask(context.Background()); err != nil { // the first fit
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu := benchcpu.Start()
			for range b.N {
				c, err := p.Ask(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				p.Tell(c, synth(c))
			}
			cpu.Report(b)
		})
	}
}
