package eval

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/vllm-tuner/tuner/surrogate"
)

// trainPrior trains the model a fleet would bring to scenario i: a
// surrogate fitted on the noise-free outcomes of n random configs
// of every other scenario (their own model, GPU and workload as context),
// none of scenario i itself. It answers "does a model trained offline on
// other deployments steer a new search" (tuner search --surrogate).
func trainPrior(ctx context.Context, states []*scenarioState, i, n int, seed uint64) (*surrogate.Surrogate, error) {
	var samples []surrogate.Sample
	for j, st := range states {
		if j == i {
			continue
		}
		r := rand.New(rand.NewPCG(seed, uint64(j)))
		for got, tries := 0, 0; got < n && tries < 20*n; tries++ {
			cfg, ok := sampleConfig(st.prob.Space, r)
			if !ok {
				continue
			}
			res, err := st.ev.runner.Run(ctx, cfg, st.prob.Workload)
			if err != nil {
				return nil, fmt.Errorf("prior sample of %s: %w", st.prob.Scenario.Name, err)
			}
			samples = append(samples, surrogate.Sample{Target: st.prob.Target, Workload: st.prob.Workload, Config: cfg, Result: &res})
			got++
		}
	}
	if len(samples) == 0 {
		return nil, fmt.Errorf("prior for %s: no other scenario to train on", states[i].prob.Scenario.Name)
	}
	opts := surrogate.DefaultOptions()
	opts.Seed, opts.Threads = seed, 1
	p := states[i].prob
	opts.Objectives = surrogateObjectives(p)
	return surrogate.Train(surrogate.NewSchema(p.Space), samples, opts)
}

// surrogateObjectives are the metrics a problem's scorer asks for: its
// objectives and its SLO metrics.
func surrogateObjectives(p *Problem) []surrogate.Objective {
	var out []surrogate.Objective
	seen := map[string]bool{}
	add := func(metric string) {
		if !seen[metric] {
			seen[metric] = true
			out = append(out, surrogate.ObjectiveFor(metric))
		}
	}
	for _, o := range p.Objectives {
		add(o.Name)
	}
	for _, b := range p.SLO {
		add(b.Metric)
	}
	return out
}
