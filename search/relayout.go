package search

import (
	"cmp"
	"math"
	"slices"

	"github.com/vllm-tuner/tuner/spaces"
)

// relayout proposes, once the search is late, the incumbent moved to
// another parallel layout (spaces.Space.Resplits: TP and DP together) that
// uses at least as many GPUs, with its other flags but max_num_seqs, which
// is per replica: the replicas share the incumbent's sequences. Each layout
// gets one such move, the nearest in TP first, unless a trial there was
// feasible already (the search has it then) or a config runs there now.
//
// Mutation changes TP or DP alone, which cannot re-split the GPUs, and the
// surrogate's roofline cannot rank layouts (see surrogate's derived), so a
// layout the opening met only with a random draw's poor flags was never
// seen with good ones: on Qwen2-72B on 8 H200s the tuner ran 233 of 240
// trials at TP 8 where 158 of the true front's 167 configs are TP 4 x DP 2.
// Measurements: docs/search-log.md, "Proposer.relayout".
func (p *Proposer) relayout(sc scalariser) (spaces.Config, bool) {
	if !p.layouts {
		return spaces.Config{}, false // one layout (one GPU)
	}
	done := map[spaces.Layout]bool{}
	at := map[string][]spaces.Layout{} // the layouts each set of other flags ran at
	for _, k := range p.sampler {
		l := spaces.LayoutOf(p.history[k].Config)
		done[l] = done[l] || p.outs[k].feasible
		if !slices.Contains(at[p.flags[k]], l) {
			at[p.flags[k]] = append(at[p.flags[k]], l)
		}
	}
	for _, ls := range at {
		if len(ls) > 1 { // flags run at two layouts: a move made already
			for _, l := range ls {
				done[l] = true
			}
		}
	}
	for _, c := range p.pending {
		done[spaces.LayoutOf(c)] = true
	}
	for _, c := range p.others {
		done[spaces.LayoutOf(c)] = true
	}
	obs, _, _, k := p.incumbent(sc)
	if k < 0 {
		return spaces.Config{}, false
	}
	moves := p.cfg.Space.Resplits(obs[k].Config)
	cur := spaces.LayoutOf(obs[k].Config)
	far := func(l spaces.Layout) float64 { return math.Abs(math.Log2(float64(l.TP)) - math.Log2(float64(cur.TP))) }
	slices.SortStableFunc(moves, func(a, b spaces.Config) int {
		return cmp.Compare(far(spaces.LayoutOf(a)), far(spaces.LayoutOf(b)))
	})
	seen := map[string]bool{}
	for _, c := range moves {
		l := spaces.LayoutOf(c)
		if l.GPUs() < cur.GPUs() || done[l] {
			continue
		}
		if c.Has("max_num_seqs") {
			seqs := spaces.IntValue(max(1, int(math.Round(float64(c.Int("max_num_seqs")*cur.DP)/float64(l.DP)))))
			if s, ok := p.acceptConfig(c.With("max_num_seqs", seqs), seen); ok {
				return s, true
			}
		}
		if s, ok := p.acceptConfig(c, seen); ok {
			return s, true
		}
	}
	return spaces.Config{}, false
}

// otherFlags identifies a config's flags apart from its layout and
// max_num_seqs (what a relayout changes).
func otherFlags(c spaces.Config) string {
	return c.Without("tensor_parallel_size").Without("data_parallel_size").Without("max_num_seqs").Canonical()
}
