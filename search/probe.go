package search

import (
	"context"
	"math"

	"github.com/vllm-tuner/tuner/spaces"
)

// probeSteps are the distances (unit cube) at which probe scores the
// incumbent moved along one numeric axis: geometric, fine near the
// incumbent, up to the cube's width.
var probeSteps = func() []float64 {
	var out []float64
	for t := 0.004; t <= 1; t *= 1.25 {
		out = append(out, t)
	}
	return out
}()

// probeFeasible is the feasibility probability at which probe places a
// predicted bound.
const probeFeasible = 0.5

// probe proposes, when a late bisection ask finds no pair, the incumbent
// moved along one numeric axis to where the surrogate places a
// feasibility bound (the farthest point before P(feasible) first drops
// below probeFeasible, or the range's end), on the axis and side whose
// bound the surrogate expects to hold the largest box relative to its own
// prediction of the incumbent's. Bisection needs an infeasible trial past
// the bound with the incumbent's levels; without one the search stalled a
// few percent inside it (8B-H100-chat: max_num_seqs 89-97 where the
// truth's best runs 86, just above the TTFT bound). The model places the
// bound well (P(feasible) 0.09 / 0.47 / 0.78 at 83 / 86 / 88 sequences
// there) even where it misses the objectives by more than the gain: either
// outcome helps, a feasible probe as a new incumbent, an infeasible one as
// bisection's partner. A side of the incumbent along an axis where a
// config with its levels was measured already, or runs now, is left out
// (explored).
//
// tuner eval search --strategies tuner,par4, 24 trials, format-7 truths,
// sums over the eight scenarios of HV@8 / HV@24 / pick, par4 HV@24: at 10
// seeds (main 494bf43: 5.725 / 6.754 / 7.827, par4 6.674) 5.725 / 6.818 /
// 7.813, par4 6.661; at 20 seeds (5.607 / 6.730 / 7.822, par4 6.704)
// 5.607 / 6.827 / 7.811, par4 6.763 (HV@24 8B-A100 0.893 -> 0.939, Qwen 7B
// 0.772 -> 0.846, 70B 0.855 -> 0.832; par4 Qwen 72B 0.724 -> 0.783,
// Mistral 0.799 -> 0.754). Without the explored sides, at 10 seeds: 5.725
// / 6.837 / 7.813, par4 6.688 (70B 0.877 -> 0.816: the probes went on
// moving max_num_batched_tokens where a trial had found nothing). Configs
// in flight counted as exploring their side, at 10 seeds: par4 HV@24 6.661
// -> 6.720 (70B 0.812 -> 0.842, Qwen 72B 0.755 -> 0.776, the rest within
// 0.01; one worker's figures unchanged by construction). Measured and
// dropped (10 seeds, same command): the bound placed at P(feasible) 0.65
// 5.725 / 6.735 / 7.808, par4 6.727, and at 0.35 5.725 / 6.772 / 7.814,
// par4 6.680; every second probe from the feasible config of highest
// throughput, valued by its throughput, for the picks: 5.725 / 6.749 /
// 7.826, par4 6.651 (Qwen 7B 0.825 -> 0.754); probes from the opening's
// bisection asks on: 5.589 / 6.823 / 7.815 (70B HV@8 0.676 -> 0.501,
// Qwen 72B 0.481 -> 0.585); where the incumbent has nothing to probe, the
// second and third largest boxes probed in turn (with configs in flight
// counted; 5.725 / 6.818 / 7.813, par4 6.720): 5.725 / 6.792 / 7.815,
// par4 6.675 (Qwen 7B 0.825 -> 0.890, 70B 0.858 -> 0.776: the 70B's gains
// are in levels, which the screening asks the probes replace move); a probe
// only where the predicted box gains 5% or more: 5.725 / 6.838 / 7.813,
// par4 6.645 (par4 8B-A100 0.935 -> 0.913, Qwen 7B 0.883 -> 0.849).
// Each line's bound is then halved six times on the model, between its
// last step above probeFeasible and the next: far from the incumbent the
// steps are a quarter of the distance apart (from 587 sequences: 108, 84)
// and 8B-H100's bound in max_num_seqs is a few sequences wide. Same
// command, with the slot wait's own factor in the surrogate (main dae818c;
// 10 seeds 5.984 / 6.919 / 7.819, par4 6.754; 20 seeds 5.795 / 6.913 /
// 7.825, par4 6.768): at 10 seeds 5.984 / 7.017 / 7.819, par4 6.811, at 20
// seeds 5.795 / 7.009 / 7.821, par4 6.824 (8B-H100 0.728 -> 0.817, par4
// 0.694 -> 0.741, par4 Qwen 72B 0.755 -> 0.788; 70B 0.893 -> 0.898).
// Before that factor (main f43fa72; 20 seeds 5.607 / 6.827 / 7.813, par4
// 6.761) the halvings gave 5.607 / 6.778 / 7.813, par4 6.749 (70B 0.832 ->
// 0.781, 8B-H100 0.712 -> 0.727): the model placed 8B-H100's bound at 95
// sequences, the truth near 90, as its TTFT log-ratio learnt above the 96
// clients (TTFT p99 885 ms, roofline 164) multiplied the roofline's slot
// wait below them (see surrogate's Objective.Offset). Also dropped (10
// seeds, main f43fa72: 5.725 / 6.818 / 7.814, par4 6.720): three chained
// line moves (the probe moved again from where the last move left it, a
// coordinate ascent on the model) 5.725 / 6.842 / 7.813, par4 6.613 (par4
// 70B 0.842 -> 0.800, Qwen 72B 0.776 -> 0.734), two 5.725 / 6.817 / 7.817,
// par4 6.680.
// Dropped too (2026-12-06, main 01589c5, 10 seeds: 5.984 / 7.023 /
// 7.841, par4 6.847): lines valued by the box of the pessimistic
// prediction (mean less one ensemble spread on throughput, plus one on
// latency and memory), so that a certain gain such as utilisation at its
// range's end (0.8 GiB a step, 3.5% of the 8B-H100 box) outranks larger
// uncertain ones: 5.984 / 6.909 / 7.828, par4 6.892 (8B-H100 0.829 ->
// 0.749). Also dropped (main cfd0f28, same command and base): each line
// valued at its largest predicted box short of its bound as well as at
// the bound (Qwen 72B's best box sits at 61 sequences per replica, under
// its 64 clients, far inside any bound): 5.984 / 6.942 / 7.840, par4 6.844
// (Qwen 7B 0.836 -> 0.786, 8B-A100 0.958 -> 0.938; Qwen 72B unchanged).
// And trades (main dd885cb, 20 seeds: 5.795 / 7.033 / 7.845, par4 6.862):
// the incumbent moved past the model's bound on one axis (0.05-0.4 of the
// cube) and another numeric axis moved until the model expects
// feasibility again, valued with the lines. On the 8B A100 short scenario
// the best throughput needs all 256 clients admitted with the budget at
// its TPOT bound (794 tokens); every seed bounds TPOT by max_num_seqs
// instead (150-190 at budgets of 5,000-65,000, 0.975 of it). Trades only
// where the incumbent sits at a bound: 5.795 / 7.021 / 7.844, par4 6.844;
// from every line: 5.795 / 6.998 / 7.841, par4 6.840 (8B-H100 0.817 ->
// 0.787). The model did not expect the gain (A100 short: the box, with its
// E2EL, falls past the client count, and it does in the simulator too:
// 14.6 s at 155 sequences, 16.3 s at 593), and no seed reached the route.
func (p *Proposer) probe(ctx context.Context, sc scalariser) (spaces.Config, bool) {
	obs, _, _, k := p.incumbent(sc)
	if k < 0 || !p.fit(ctx) {
		return spaces.Config{}, false
	}
	inc := p.units[p.sampler[k]]
	// A line is the incumbent moved along axis i to side s; ts[m] is the
	// distance of its m-th candidate, cands[from+m].
	type line struct {
		i    int
		s    float64
		from int
		ts   []float64
	}
	var cands []spaces.Config
	var lines []*line
	seen := map[string]bool{}
	cands = append(cands, obs[k].Config)
	xs := p.ownUnits()
	for _, c := range p.pending {
		xs = append(xs, p.unitVector(c))
	}
	for _, c := range p.others {
		xs = append(xs, p.unitVector(c))
	}
	probed := p.sameLevels(xs, inc)
	at := func(i int, s, t float64) (spaces.Config, bool) {
		y := append([]float64(nil), inc...)
		y[i] = math.Max(0, math.Min(1, inc[i]+s*t))
		c, err := p.cfg.Space.Normalize(spaces.NewConfig(p.fromUnitVector(y)))
		return c, err == nil && p.cfg.Space.Validate(c) == nil
	}
	for i, d := range p.dims {
		if d.levels != nil {
			continue
		}
		for _, s := range []float64{-1, 1} {
			if p.explored(probed, inc, i, s) {
				continue
			}
			l := &line{i: i, s: s, from: len(cands)}
			for _, t := range probeSteps {
				if c, ok := at(i, s, t); ok && !seen[c.ID()] {
					seen[c.ID()] = true
					cands = append(cands, c)
					l.ts = append(l.ts, t)
				}
				if inc[i]+s*t <= 0 || inc[i]+s*t >= 1 {
					break // the range's end
				}
			}
			if len(l.ts) > 0 {
				lines = append(lines, l)
			}
		}
	}
	preds, err := p.cfg.Scorer.Score(ctx, cands)
	if err != nil || len(preds) != len(cands) {
		return spaces.Config{}, false
	}
	// Each line's bound: its last candidate the model expects feasible
	// (lo) and the first it does not (hi), then halved on the model alone:
	// the geometric steps are a quarter of the distance apart far from the
	// incumbent, and bounds in max_num_seqs are a few sequences wide.
	type bound struct {
		l      *line
		lo, hi float64
		c      spaces.Config
		pr     Prediction
	}
	var bounds []*bound
	for _, l := range lines {
		j := -1
		end := l.from + len(l.ts)
		for m := l.from; m < end && preds[m].PFeasible >= probeFeasible; m++ {
			j = m
		}
		if j < 0 {
			continue // the incumbent sits at the bound: bisection's part
		}
		b := &bound{l: l, lo: l.ts[j-l.from], hi: -1, c: cands[j], pr: preds[j]}
		if j+1 < end {
			b.hi = l.ts[j+1-l.from]
		}
		bounds = append(bounds, b)
	}
	for range probeHalvings {
		var open []*bound
		var mids []spaces.Config
		for _, b := range bounds {
			if b.hi < 0 {
				continue
			}
			c, ok := at(b.l.i, b.l.s, (b.lo+b.hi)/2)
			if !ok || c.ID() == b.c.ID() {
				b.hi = -1
				continue
			}
			open, mids = append(open, b), append(mids, c)
		}
		if len(mids) == 0 {
			break
		}
		mp, err := p.cfg.Scorer.Score(ctx, mids)
		if err != nil || len(mp) != len(mids) {
			break
		}
		for m, b := range open {
			if mp[m].PFeasible >= probeFeasible {
				b.lo, b.c, b.pr = (b.lo+b.hi)/2, mids[m], mp[m]
			} else {
				b.hi = (b.lo + b.hi) / 2
			}
		}
	}
	boxOf := p.boxer(sc)
	box := func(pr Prediction) float64 {
		if len(pr.Mean) != len(p.cfg.Objectives) {
			return 0
		}
		return boxOf(pr.Mean)
	}
	base := box(preds[0])
	var best *bound
	bestGain := 1.0
	for _, b := range bounds {
		if g := box(b.pr) / math.Max(base, 1e-300); g > bestGain && !p.tried[b.c.ID()] && !p.isPending(b.c.ID()) {
			best, bestGain = b, g
		}
	}
	if best == nil {
		return spaces.Config{}, false
	}
	return best.c, true
}

// probeHalvings is how many times probe halves each line's predicted
// bound on the model.
const probeHalvings = 6

// ownUnits is the unit vectors of the sampler's observations.
func (p *Proposer) ownUnits() [][]float64 {
	out := make([][]float64, len(p.sampler))
	for i, k := range p.sampler {
		out[i] = p.units[k]
	}
	return out
}

// explored reports whether a config measured or in flight (probed: those
// with the incumbent's levels) lies on side s of inc along numeric axis i
// with every other numeric coordinate within bisectResolution of inc's:
// that side was measured already, and what it held is in the history (a
// better config would be the incumbent, an infeasible one bisection's
// partner), or will be.
func (p *Proposer) explored(probed [][]float64, inc []float64, i int, s float64) bool {
	for _, x := range probed {
		if (x[i]-inc[i])*s <= 0 {
			continue
		}
		near := true
		for k, d := range p.dims {
			if k != i && d.levels == nil && math.Abs(x[k]-inc[k]) > bisectResolution {
				near = false
				break
			}
		}
		if near {
			return true
		}
	}
	return false
}
