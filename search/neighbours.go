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
// the truth's best runs 1024 (TTFT p99 median 2,834 ms against 1,976). tuner eval search --strategies
// tuner,par4, 10 seeds, 24 trials, format-7 truths, sums over the eight
// scenarios (main f8e7015: HV@8 / HV@24 / pick 5.725 / 6.556 / 7.827,
// par4 HV@24 6.607): with them 5.725 / 6.653 / 7.823, par4 6.618 (70B
// HV@24 0.790 -> 0.863, its best configs' TTFT p99 median 2,384 ms; Qwen
// 72B 0.737 -> 0.772; 8B-H100 0.703 -> 0.685). Mistral 7B on long
// documents still runs 512 where its truth runs 1024: the surrogate does
// not rank the move higher. Measured and dropped: every fourth late ask
// the best-screened neighbour alone, whatever else the pool held: 5.725 /
// 6.606 / 7.797, par4 6.551 (Mixtral HV@24 0.954 -> 0.919); that at the
// opening's 4th and 7th asks instead, to leave the first feasible trial's
// levels sooner (main 7789e76): 5.509 / 6.709 / 7.821, par4 HV@8 / HV@24
// 5.023 / 6.618 -> 4.666 / 6.633 (8B-H100 HV@8 0.631 -> 0.537, 70B 0.676
// -> 0.580); the
// neighbours from the first screened ask on: 5.746 / 6.684 / 7.809, par4
// 6.618; numeric one-axis steps of the incumbent (0.015, 0.04, 0.1 each
// way) added: 5.725 / 6.627 / 7.807, par4 6.632. Within the seeds' noise
// of this, not kept for lack of a clear gain: the neighbours of the
// feasible config of highest throughput too (the one a recommendation
// picks) 5.725 / 6.647 / 7.818, par4 6.661; those of every front member
// 5.725 / 6.654 / 7.820, par4 6.623. Dropped too (2026-12-06, main
// 01589c5: 5.984 / 7.023 / 7.841, par4 HV@24 6.847): every fourth late ask
// the neighbour, ranked by the acquisition, whose level no feasible trial
// of the study had run (async scheduling, off in the default config, is
// on in most truths' best boxes and was tried 0-2 times in some seeds):
// 5.984 / 7.028 / 7.827, par4 6.776 (Mixtral 0.963 -> 0.994, 8B-H100
// 0.829 -> 0.790, par4 70B 0.904 -> 0.830).
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
