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

// probeLine is the steps of probeSteps that move coordinate x to side s
// (-1 or 1) within the unit interval, up to the first that reaches its end
// (clamped there by the caller).
func probeLine(x, s float64) []float64 {
	for n, t := range probeSteps {
		if x+s*t <= 0 || x+s*t >= 1 {
			return probeSteps[:n+1]
		}
	}
	return probeSteps
}

// probeFeasible is the feasibility probability at which probe places a
// predicted bound.
const probeFeasible = 0.5

// probe proposes, when a late bisection ask finds no pair, the incumbent
// moved along one numeric axis to the feasibility bound the surrogate
// predicts (the farthest point before P(feasible) drops below
// probeFeasible, or the range's end), on the axis and side whose bound the
// model expects to hold the largest box relative to the incumbent's.
// Bisection needs an infeasible trial past the bound with the incumbent's
// levels; without one the search stalled a few percent inside it. The
// model places bounds well even where it misses the objectives, and either
// outcome helps: a feasible probe is a new incumbent, an infeasible one
// bisection's partner. A side where a config with the incumbent's levels
// was measured, or runs now, is skipped (explored).
// Measurements: docs/search-log.md, "Proposer.probe".
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
			for _, t := range probeLine(inc[i], s) {
				if c, ok := at(i, s, t); ok && !seen[c.ID()] {
					seen[c.ID()] = true
					cands = append(cands, c)
					l.ts = append(l.ts, t)
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
// bound on the model: far from the incumbent the geometric steps are a
// quarter of the distance apart, and a bound in max_num_seqs is a few
// sequences wide.
// Measurements: docs/search-log.md, "probeHalvings".
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
