package search

import "github.com/vllm-tuner/tuner/spaces"

// levelNeighbours returns the incumbent's level neighbours not yet tried,
// pending or in seen: the incumbent with one level parameter (a bool, a
// choice, a listed value, TP or DP) moved to another of its levels, every
// other value kept. Once the search is late they join the screening pool,
// where the acquisition weighs them like any candidate.
//
// Bisection keeps the incumbent's levels and mutation moves a level with
// probability 2/d, together with other coordinates, so a late search kept
// the levels its opening happened to meet: on Llama 70B on four H100s the
// best config of 7 of 10 seeds ran long_prefill_token_threshold 512 where
// the truth's best runs 1024.
// Measurements: docs/search-log.md, "Proposer.levelNeighbours".
func (p *Proposer) levelNeighbours(sc scalariser, seen map[string]bool) []spaces.Config {
	obs, _, _, k := p.incumbent(sc)
	if k < 0 {
		return nil
	}
	inc, cur := obs[k].Config, p.units[p.sampler[k]] // obs[k] is history[sampler[k]]
	var out []spaces.Config
	for i, d := range p.dims {
		for _, l := range d.levels {
			if d.unit(l) == cur[i] {
				continue // the incumbent's own level
			}
			if c, ok := p.acceptConfig(inc.With(d.p.Name, l), seen); ok {
				out = append(out, c)
			}
		}
	}
	return out
}
