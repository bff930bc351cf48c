package search

import (
	"context"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
)

// TestFirstClaimsScreened: the workers of a parallel study claim configs
// before any result. From the second claim on, the scorer ranks them (the
// roofline alone, surrogate.Scaled, until trials are measured), so they
// are not the sampler's unscreened draws: on the simulator more of them
// meet the SLO.
func TestFirstClaimsScreened(t *testing.T) {
	s := h100(t)
	w := smokeWorkload()
	objs := store.DefaultObjectives("tpot_p99")
	slo := trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 20}}
	run := simRun(t, s, 5)
	var screenedOK, drawnOK int
	for seed := range uint64(3) {
		claims := func(minScreen int) []spaces.Config {
			sc, err := NewSurrogateScorer(s, w, objs, slo, surrogate.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := newProposer(t, ProposerConfig{Space: s, Seed: seed, Objectives: objs, SLO: slo, Scorer: sc, MinScreenHistory: minScreen})
			var out []spaces.Config
			for range 4 {
				p.SetPending(out)
				c, err := p.Ask(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, c)
			}
			return out
		}
		feasible := func(cs []spaces.Config) (n int) {
			for _, c := range cs[1:] { // the first is vLLM's default either way
				if r := run(c); r.Usable() {
					if ok, _ := slo.Check(r.Metrics()); ok {
						n++
					}
				}
			}
			return n
		}
		screened, drawn := claims(0), claims(2)
		seen := map[string]bool{}
		for _, c := range screened {
			if seen[c.ID()] {
				t.Fatalf("seed %d: config %s claimed twice", seed, c.ID())
			}
			seen[c.ID()] = true
		}
		fs, fd := feasible(screened), feasible(drawn)
		t.Logf("seed %d: claims 2-4 meeting the SLO: screened %d, drawn %d", seed, fs, fd)
		screenedOK, drawnOK = screenedOK+fs, drawnOK+fd
	}
	// 9 of 9 against 4 of 9 when written.
	if screenedOK < 7 || screenedOK <= drawnOK {
		t.Errorf("claims 2-4 of three seeds meeting the SLO: screened %d of 9, drawn %d", screenedOK, drawnOK)
	}
}
