//go:build !race

// Pure computation (proposers over the noise-free simulator or a synthetic
// oracle, one goroutine): built without -race only, run by `make norace`
// (see the Makefile). The proposer's locking is raced by
// TestConcurrentAskTell.

package search

import (
	"fmt"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
)

// Property: over many seeds and every sampler, with and without screening,
// every proposal is valid in the (pruned) space and no ID repeats.
func TestProposalsValidAndUnique(t *testing.T) {
	seeds, n := 6, 24
	if testing.Short() {
		seeds, n = 4, 16
	}
	base := h100(t)
	// A pruned space too: narrow ranges, dropped levels.
	pruned := base.Clone()
	mp, _ := pruned.Param("max_num_seqs")
	mp.Min, mp.Max = 64, 512
	bp, _ := pruned.Param("block_size")
	bp.Values = []float64{16, 32}
	for _, space := range []*spaces.Space{base, pruned} {
		for _, k := range samplers {
			for _, screen := range []bool{false, true} {
				for seed := range seeds {
					cfg := ProposerConfig{Space: space, Sampler: k, Seed: uint64(seed), Candidates: 32}
					if screen {
						cfg.Scorer = oracle{objs: store.DefaultObjectives("")}
					}
					p := newProposer(t, cfg)
					seen := map[string]bool{}
					for i, c := range runProposer(t, p, n, nil) {
						if err := space.Validate(c); err != nil {
							t.Fatalf("%s seed %d trial %d: invalid %s: %v", k, seed, i, c, err)
						}
						for _, d := range dimsOf(space) {
							v, _ := c.Get(d.p.Name)
							if !d.p.Contains(v) && !v.Equal(d.p.Default) {
								t.Fatalf("%s seed %d trial %d: %s=%s outside %s", k, seed, i, d.p.Name, v, d.p.RangeString())
							}
						}
						if seen[c.ID()] {
							t.Fatalf("%s seed %d trial %d: duplicate %s", k, seed, i, c)
						}
						seen[c.ID()] = true
					}
				}
			}
		}
	}
}

// Screening with a perfect model must beat the sampler alone clearly.
func TestScreeningImprovesHypervolume(t *testing.T) {
	objs := store.DefaultObjectives("")
	slo := trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 20}}
	ref := []float64{0, 40, 100}
	n := 16
	var plain, screened, random float64
	seeds := 5
	for seed := range seeds {
		sp := h100(t)
		run := func(cfg ProposerConfig) float64 {
			cfg.Space, cfg.Seed, cfg.SLO, cfg.Objectives = sp, uint64(seed), slo, objs
			return searchHV(t, cfg, n, nil, ref)
		}
		plain += run(ProposerConfig{Sampler: SamplerTPE})
		random += run(ProposerConfig{Sampler: SamplerRandom})
		screened += run(ProposerConfig{Sampler: SamplerTPE, Scorer: oracle{objs: objs}, MinScreenHistory: 4})
	}
	t.Logf("mean HV after %d trials: random %.0f, tpe %.0f, tpe+oracle screening %.0f", n, random/float64(seeds), plain/float64(seeds), screened/float64(seeds))
	if screened < 1.1*plain || screened < 1.1*random {
		t.Fatalf("screening HV %.0f not clearly above tpe %.0f / random %.0f", screened, plain, random)
	}
}

// Search-quality smoke test on the simulator: TPE with surrogate screening
// reaches a clearly higher hypervolume in 16 trials than random search.
func TestSimSearchBeatsRandom(t *testing.T) {
	objs := store.DefaultObjectives("tpot_p99")
	slo := trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 40}}
	// The reference point sits near the default config's throughput, so the
	// hypervolume measures what a search adds beyond the obvious region.
	ref := []float64{3500, 40, 80}
	n, seeds := 16, 4
	if testing.Short() {
		seeds = 2
	}
	var rnd, tpe, full float64
	wins := 0
	for seed := range seeds {
		s := h100(t)
		run := func(cfg ProposerConfig) float64 {
			cfg.Space, cfg.Seed, cfg.Objectives, cfg.SLO = s, uint64(seed), objs, slo
			return searchHV(t, cfg, n, simRun(t, s, uint64(seed)), ref)
		}
		sc, err := NewSurrogateScorer(s, smokeWorkload(), objs, slo, surrogate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r, p, f := run(ProposerConfig{Sampler: SamplerRandom}), run(ProposerConfig{Sampler: SamplerTPE}), run(ProposerConfig{Sampler: SamplerTPE, Scorer: sc})
		t.Logf("seed %d: HV random %.0f, tpe %.0f, tpe+surrogate %.0f", seed, r, p, f)
		rnd, tpe, full = rnd+r, tpe+p, full+f
		if f > r {
			wins++
		}
	}
	t.Logf("mean HV over %d seeds after %d trials: random %.0f, tpe %.0f, tpe+surrogate %.0f", seeds, n, rnd/float64(seeds), tpe/float64(seeds), full/float64(seeds))
	if full < 1.5*rnd || wins < seeds-1 {
		t.Fatalf("tpe+surrogate (mean HV %.0f, beat random on %d of %d seeds) not clearly above random (%.0f)", full/float64(seeds), wins, seeds, rnd/float64(seeds))
	}
}

func TestSeededRunsReproducible(t *testing.T) {
	for _, k := range samplers {
		for _, screen := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/screen=%v", k, screen), func(t *testing.T) {
				run := func(seed uint64) []string {
					cfg := ProposerConfig{Space: h100(t), Sampler: k, Seed: seed, Candidates: 32}
					if screen {
						cfg.Scorer = oracle{objs: store.DefaultObjectives("")}
					}
					var ids []string
					for _, c := range runProposer(t, newProposer(t, cfg), 20, nil) {
						ids = append(ids, c.ID())
					}
					return ids
				}
				a, b, c := run(7), run(7), run(8)
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Fatalf("same seed, different sequences:\n%v\n%v", a, b)
				}
				if fmt.Sprint(a) == fmt.Sprint(c) {
					t.Fatal("different seeds gave the same sequence")
				}
			})
		}
	}
}

// On a long history the surrogate is refit once the history has grown by
// RefitGrowth, not after every tell; on a short one after every tell.
func TestRefitScheduleGrowsWithHistory(t *testing.T) {
	for _, tc := range []struct {
		history, asks    int
		minFits, maxFits int
	}{
		{history: 10, asks: 10, minFits: 10, maxFits: 10}, // every tell below 50 trials
		{history: 500, asks: 25, minFits: 2, maxFits: 2},  // 0.04 x ~510 = 20 tells between fits
	} {
		t.Run(fmt.Sprintf("history-%d", tc.history), func(t *testing.T) {
			fs := &failingScorer{}
			s := h100(t)
			hist := randomHistory(t, s, tc.history-1, 1, synth)
			def := s.DefaultConfig()
			hist = append(hist, Observation{Config: def, Result: synth(def)})
			p := newProposer(t, ProposerConfig{Space: s, Seed: 3, Scorer: fs, History: hist})
			runProposer(t, p, tc.asks, synth)
			if fs.fits < tc.minFits || fs.fits > tc.maxFits {
				t.Fatalf("Fit called %d times in %d asks on %d trials of history, want %d-%d", fs.fits, tc.asks, tc.history, tc.minFits, tc.maxFits)
			}
		})
	}
}

// Warm start: history from the same model on another GPU (A100), weighted
// less and carrying its target, reaches the surrogate and the mutation pool.
// Since screening starts at once (MinScreenHistory 0: the roofline scaled to
// the trials so far), a cold search catches up within 8 trials (it was 1.3x
// behind when screening started at 6), so this guards that the other context
// does not mislead the search: after 8 trials on H100 the warm-started one
// is not clearly behind.
func TestSimWarmStart(t *testing.T) {
	objs := store.DefaultObjectives("tpot_p99")
	slo := trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 40}}
	ref := []float64{3500, 40, 80}
	a100 := testSpace(t, "Llama-3.1-8B", "A100-80GB", 1)
	at := *a100.Target()
	w := smokeWorkload()
	var prior []Observation
	for _, o := range randomHistory(t, a100, 40, 11, simRun(t, a100, 11)) {
		o.Weight, o.Target, o.Workload = 0.5, &at, &w
		prior = append(prior, o)
	}
	seeds := 3
	if testing.Short() {
		seeds = 2
	}
	const warmTrials = 8
	var cold, warm float64
	for seed := range seeds {
		s := h100(t)
		run := func(hist []Observation) float64 {
			sc, err := NewSurrogateScorer(s, w, objs, slo, surrogate.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := newProposer(t, ProposerConfig{Space: s, Seed: uint64(seed), Objectives: objs, SLO: slo, Scorer: sc, History: hist})
			runProposer(t, p, warmTrials, simRun(t, s, uint64(seed)))
			var own []Observation
			for _, o := range p.History() {
				if o.Target == nil {
					own = append(own, o)
				}
			}
			if len(own) != warmTrials {
				t.Fatalf("%d own trials, want %d", len(own), warmTrials)
			}
			return hvOf(t, own, objs, slo, ref)
		}
		c, wm := run(nil), run(prior)
		t.Logf("seed %d: HV after %d trials cold %.0f, warm %.0f", seed, warmTrials, c, wm)
		cold, warm = cold+c, warm+wm
	}
	if warm < 0.75*cold {
		t.Fatalf("warm start mean HV %.0f clearly below cold %.0f: the other context misleads the search", warm/float64(seeds), cold/float64(seeds))
	}
}
