package search

import (
	"cmp"
	"slices"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
)

// bisectResolution is the distance (in the unit cube of the numeric
// parameters) below which a bound counts as located: closer pairs are not
// bisected again, so the search does not spend trials on steps that move the
// objectives by less than the measurement noise.
// Measurements: docs/search-log.md, "bisectResolution".
const bisectResolution = 0.03

// bisect proposes the midpoint between the incumbent and the nearest
// infeasible observation that would hold more hypervolume than it, were it
// feasible. The incumbent is the feasible config of this context whose own
// box against the fixed reference point is largest: most of a front's
// hypervolume usually sits in one config just inside an SLO bound (a TPOT
// limit met by the fewest sequences that still keep TTFT within its
// limit), and bounds in max_num_seqs or max_num_batched_tokens are cliffs a
// surrogate trained on a few dozen trials places only roughly. Each
// midpoint halves the distance to the bound. Numeric coordinates are
// interpolated; levels stay the incumbent's, so the step moves along the
// parameters that set the bound. ok is false when there is no incumbent, no
// such infeasible observation farther than bisectResolution, or every
// midpoint was tried.
//
// Boxes are measured against the objectives' fixed worst point as it is
// (exactRef), the point the study's front is judged by: the screening's
// reference is never tighter than the history's worst point, so once a
// trial is measured above a latency limit, configs near the limit hold
// boxes they do not hold against it and the incumbent stays at the
// high-latency end.
//
// A pair whose midpoint is shadowed (see shadowed) is skipped; with none
// left the ask screens. With workers in parallel a pending midpoint is
// skipped and the next farther pair is bisected instead: a second worker on
// another bound finds more than a second point on the same one.
// Measurements: docs/search-log.md, "Proposer.bisect".
func (p *Proposer) bisect(sc scalariser) (spaces.Config, bool) {
	obs, outs, vols, k := p.incumbent(sc)
	if k < 0 {
		return spaces.Config{}, false
	}
	xs := p.ownUnits() // xs[i] is obs[i]'s
	inc, incVol := xs[k], vols[k]
	type far struct {
		x    []float64
		dist float64
	}
	var cands []far
	for i := range obs {
		e := outs[i]
		if e.failed || e.feasible || vols[i] <= incVol {
			continue
		}
		if d := p.numDist2(xs[i], inc); d > bisectResolution*bisectResolution {
			cands = append(cands, far{xs[i], d})
		}
	}
	slices.SortStableFunc(cands, func(a, b far) int { return cmp.Compare(a.dist, b.dist) })
	probed := p.sameLevels(xs, inc)
	seen := map[string]bool{}
	for _, c := range cands {
		y := append([]float64(nil), inc...)
		for k, dm := range p.dims {
			if dm.levels == nil {
				y[k] = (inc[k] + c.x[k]) / 2
			}
		}
		if p.shadowed(y, c.dist/4, probed) {
			continue
		}
		if cfg, ok := p.accept(p.fromUnitVector(y), seen); ok {
			return cfg, true
		}
	}
	return spaces.Config{}, false
}

// incumbent returns the sampler's observations and outcomes, the box each
// usable one holds alone against the objectives' fixed worst point, and the
// index of the incumbent (the feasible one with the largest box; -1 when
// none is feasible). The boxes depend on the history alone (the
// scalariser's normalisation is the history's), so they are kept until the
// next tell: one late ask may need them for relayout, bisection and the
// level neighbours, each a pass over the history (6 ms at 10,000 trials
// on the benchmark space). Callers must not modify the slices.
func (p *Proposer) incumbent(sc scalariser) (obs []Observation, outs []outcome, vols []float64, inc int) {
	if m := &p.incMemo; m.valid && m.told == len(p.history) {
		return m.obs, m.outs, m.vols, m.inc
	}
	defer func() { p.incMemo = incumbentMemo{true, len(p.history), obs, outs, vols, inc} }()
	box := p.boxer(sc)
	obs, outs = p.samplerObs(), p.samplerOuts()
	vols = make([]float64, len(obs))
	inc = -1
	for i := range obs {
		if !outs[i].failed {
			vols[i] = box(outs[i].vals)
		}
		if outs[i].feasible && (inc < 0 || vols[i] > vols[inc]) {
			inc = i
		}
	}
	return obs, outs, vols, inc
}

// boxer returns the box an objective vector (own units) holds alone against
// the objectives' fixed worst point (exactRef), in sc's normalised space:
// how incumbent ranks measured configs and probe predicted ones.
func (p *Proposer) boxer(sc scalariser) func(vals []float64) float64 {
	ref := exactRef(fixedRef(p.cfg.Objectives, p.cfg.SLO, p.cfg.Space.Target()), sc.norm)
	dirs := minDirs(len(p.cfg.Objectives))
	return func(vals []float64) float64 {
		v, _ := pareto.Hypervolume([][]float64{sc.norm.apply(vals)}, dirs, ref)
		return v
	}
}

// incumbentMemo is incumbent's result for a history of told observations.
type incumbentMemo struct {
	valid bool
	told  int
	obs   []Observation
	outs  []outcome
	vols  []float64
	inc   int
}

// numDist2 is the squared distance of two unit vectors in their numeric
// coordinates (levels left out: bisection keeps the incumbent's).
func (p *Proposer) numDist2(a, b []float64) float64 {
	d := 0.0
	for k, dm := range p.dims {
		if dm.levels == nil {
			d += (a[k] - b[k]) * (a[k] - b[k])
		}
	}
	return d
}

// sameLevels returns the unit vectors of xs (this context's measured
// configs) that have inc's levels: the points a bisection from inc could
// land next to. Configs in flight on other workers do not shadow: counting
// them lowered par4's HV@24.
// Measurements: docs/search-log.md, "Proposer.sameLevels".
func (p *Proposer) sameLevels(xs [][]float64, inc []float64) [][]float64 {
	var out [][]float64
	for _, x := range xs {
		if p.levelsEqual(x, inc) {
			out = append(out, x)
		}
	}
	return out
}

// levelsEqual reports whether two unit vectors have the same levels.
func (p *Proposer) levelsEqual(a, b []float64) bool {
	for k, dm := range p.dims {
		if dm.levels != nil && a[k] != b[k] {
			return false
		}
	}
	return true
}

// shadowed reports whether a probed point lies nearer to the midpoint y
// (numeric coordinates) than the incumbent does (r2: the squared distance
// from the incumbent): y is then past a point already measured toward the
// same bound, and bisecting there repeats it. On 8B-H100-chat every
// bisection of a farther pair, taken while the nearest pair's midpoint was
// tried or in flight, was infeasible (8 of 8, par1 and par4).
func (p *Proposer) shadowed(y []float64, r2 float64, probed [][]float64) bool {
	return slices.ContainsFunc(probed, func(q []float64) bool { return p.numDist2(q, y) < r2*(1-1e-9) })
}
