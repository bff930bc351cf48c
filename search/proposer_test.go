package search

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
)

var samplers = []SamplerKind{SamplerTPE, SamplerRandom, SamplerCMAES}

func TestFirstProposalIsDefault(t *testing.T) {
	for _, k := range samplers {
		t.Run(string(k), func(t *testing.T) {
			s := h100(t)
			p := newProposer(t, ProposerConfig{Space: s, Sampler: k, Seed: 1})
			c, err := p.Ask(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !c.Equal(s.DefaultConfig()) {
				t.Fatalf("trial 0 = %s, want the default %s", c, s.DefaultConfig())
			}
			// A pending default is not proposed twice.
			c2, err := p.Ask(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if c2.ID() == c.ID() {
				t.Fatal("second ask repeated the pending default")
			}
		})
	}
}

func TestDefaultSkippedWhenInHistory(t *testing.T) {
	s := h100(t)
	def := s.DefaultConfig()
	p := newProposer(t, ProposerConfig{Space: s, Seed: 1, History: []Observation{{Config: def, Result: synth(def)}}})
	c, err := p.Ask(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.ID() == def.ID() {
		t.Fatal("default proposed again although the history has it")
	}
}

func TestExhaustedSpace(t *testing.T) {
	s := h100(t).Clone()
	// Fix everything but one bool: two configs exist.
	for i := range s.Params {
		if s.Params[i].Name != "enforce_eager" {
			s.Params[i].Tune = s.Params[i].Fixed != nil
		}
	}
	p := newProposer(t, ProposerConfig{Space: s, Seed: 1, MaxAttempts: 8})
	runProposer(t, p, 2, nil)
	if _, err := p.Ask(context.Background()); !errors.Is(err, ErrExhausted) {
		t.Fatalf("third ask: err = %v, want ErrExhausted", err)
	}
}

func TestAskHonoursContext(t *testing.T) {
	p := newProposer(t, ProposerConfig{Space: h100(t), Seed: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Ask(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestBadConfig(t *testing.T) {
	for name, cfg := range map[string]ProposerConfig{
		"no space":     {},
		"bad sampler":  {Space: h100(t), Sampler: "grid"},
		"bad fraction": {Space: h100(t), RandomFraction: 2},
	} {
		if _, err := NewProposer(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
}

// goptuna's CMA-ES is not safe for concurrent use; Proposer serialises it.
// Run with -race: concurrent asks and tells must not race.
func TestConcurrentAskTell(t *testing.T) {
	for _, k := range samplers {
		t.Run(string(k), func(t *testing.T) {
			p := newProposer(t, ProposerConfig{Space: h100(t), Sampler: k, Seed: 3})
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 6 {
						c, err := p.Ask(context.Background())
						if err != nil {
							errs <- err
							return
						}
						p.Tell(c, synth(c))
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, o := range p.History() {
				if seen[o.Config.ID()] {
					t.Fatalf("duplicate %s under concurrency", o.Config)
				}
				seen[o.Config.ID()] = true
			}
			if len(seen) != 24 {
				t.Fatalf("%d distinct trials, want 24", len(seen))
			}
		})
	}
}

// failingScorer always errors; the proposer falls back to the sampler.
type failingScorer struct{ fits int }

func (f *failingScorer) Score(context.Context, []spaces.Config) ([]Prediction, error) {
	return nil, errors.New("model not ready")
}
func (f *failingScorer) Fit(context.Context, []Observation) error { f.fits++; return nil }

func TestScorerErrorFallsBack(t *testing.T) {
	fs := &failingScorer{}
	p := newProposer(t, ProposerConfig{Space: h100(t), Seed: 2, Scorer: fs, MinScreenHistory: 2, RefitEvery: 2})
	cs := runProposer(t, p, 10, nil)
	if len(cs) != 10 {
		t.Fatal("asks failed")
	}
	// Screening starts after 2 usable trials (asks 3..10 = 8 asks); Fit runs
	// on the first screening ask and then every 2 tells.
	if fs.fits < 3 || fs.fits > 5 {
		t.Fatalf("Fit called %d times, want about 4 (every 2 tells)", fs.fits)
	}
}

// TestSetPending: configs in flight on other workers are never proposed
// (vLLM's default included), for every sampler; TPE also sees them as
// constant liars and still proposes valid configs.
func TestSetPending(t *testing.T) {
	for _, k := range samplers {
		t.Run(string(k), func(t *testing.T) {
			s := h100(t)
			p := newProposer(t, ProposerConfig{Space: s, Sampler: k, Seed: 4})
			other := newProposer(t, ProposerConfig{Space: s, Sampler: k, Seed: 4})
			ctx := context.Background()
			var pending []spaces.Config
			for range 3 { // what another worker with the same seed runs now
				c, err := other.Ask(ctx)
				if err != nil {
					t.Fatal(err)
				}
				pending = append(pending, c)
			}
			p.SetPending(pending)
			for range 12 {
				c, err := p.Ask(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Validate(c); err != nil {
					t.Fatalf("proposal %s: %v", c, err)
				}
				for _, o := range pending {
					if o.ID() == c.ID() {
						t.Fatalf("proposed %s, pending on another worker", c.ID())
					}
				}
				p.Tell(c, synth(c))
			}
		})
	}
}

func TestLiarValue(t *testing.T) {
	for _, tc := range []struct {
		told []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 3}, {[]float64{-2, 7, 7}, 7}} {
		if got := liarValue(tc.told); got != tc.want {
			t.Errorf("liarValue(%v) = %v, want %v", tc.told, got, tc.want)
		}
	}
}
