package search

import (
	"cmp"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
)

// bisectResolution is the distance (in the unit cube of the numeric
// parameters) below which a bound counts as located: closer pairs are not
// bisected again, so the search does not spend trials on steps that move the
// objectives by less than the measurement noise.
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
func (p *Proposer) bisect(sc scalariser) (spaces.Config, bool) {
	ref := normRef(fixedRef(p.cfg.Objectives, p.cfg.SLO, p.cfg.Space.Target()), sc.norm)
	dirs := minDirs(len(p.cfg.Objectives))
	box := func(vals []float64) float64 { // the hypervolume one config holds alone
		hv, _ := pareto.Hypervolume([][]float64{sc.norm.apply(vals)}, dirs, ref)
		return hv
	}
	obs, outs := p.samplerObs(), p.samplerOuts()
	var inc []float64
	incVol := -1.0
	for i, o := range obs {
		if outs[i].feasible {
			if v := box(outs[i].vals); v > incVol {
				incVol, inc = v, p.unitVector(o.Config)
			}
		}
	}
	if inc == nil {
		return spaces.Config{}, false
	}
	type far struct {
		x    []float64
		dist float64
	}
	var cands []far
	for i, o := range obs {
		e := outs[i]
		if e.failed || e.feasible || box(e.vals) <= incVol {
			continue
		}
		x := p.unitVector(o.Config)
		d := 0.0
		for k, dm := range p.dims {
			if dm.levels == nil {
				d += (x[k] - inc[k]) * (x[k] - inc[k])
			}
		}
		if d > bisectResolution*bisectResolution {
			cands = append(cands, far{x, d})
		}
	}
	slices.SortStableFunc(cands, func(a, b far) int { return cmp.Compare(a.dist, b.dist) })
	seen := map[string]bool{}
	for _, c := range cands {
		y := append([]float64(nil), inc...)
		for k, dm := range p.dims {
			if dm.levels == nil {
				y[k] = (inc[k] + c.x[k]) / 2
			}
		}
		if cfg, ok := p.accept(p.fromUnitVector(y), seen); ok {
			return cfg, true
		}
	}
	return spaces.Config{}, false
}

// lineSteps are the unit-cube steps of a pick line search, coarse to fine:
// a step already tried (or rounding to a tried config) gives way to the
// next finer one, so repeated line asks around the same pick close in on
// its best value to about a quarter of a percent of the axis.
var lineSteps = []float64{0.02, 0.01, 0.005, 0.0025}

// minLineCorrelation is the smallest |correlation| between a numeric axis
// and the pick objective over the feasible trials for lineSearch to step
// along it: below it the sign says nothing about the way up.
const minLineCorrelation = 0.3

// minLineGain is the smallest relative gain of the pick objective a line
// step must bring for the axis to be stepped along again: smaller gains are
// within the measurement noise and the trials are worth more to the front.
const minLineGain = 0.01

// lineDone reports whether the line search along axis k (direction dir) of
// the pick xs[best] is over: a feasible trial that differs from the pick in
// k alone lies on the improving side (a step passed the peak, for it is not
// the pick), or one that differs from it in any one axis is within
// minLineGain of it (the pick is a step that gained less than the noise, or
// the axis is flat there: on a throughput plateau, gains of 0.1-0.3% made
// every step a new pick whose axes were all searched again). An infeasible
// step past a bound does not end it: finer steps follow.
func lineDone(xs [][]float64, ys []float64, best, k, dir int) bool {
	for j, x := range xs {
		if j == best {
			continue
		}
		for a := range x {
			if !onlyDiffers(x, xs[best], a) {
				continue
			}
			ahead := a == k && (x[a]-xs[best][a])*float64(dir) > 0
			if ahead || ys[best]-ys[j] < minLineGain*math.Abs(ys[best]) {
				return true
			}
		}
	}
	return false
}

// onlyDiffers reports whether a and b differ in coordinate k and no other.
func onlyDiffers(a, b []float64, k int) bool {
	for i := range a {
		if (a[i] != b[i]) != (i == k) {
			return false
		}
	}
	return true
}

// lineSearch proposes the pick (the feasible config best on the first
// objective, the one a recommendation ranks by) moved along the numeric axis
// whose value correlates most with that objective across the feasible
// trials, in the direction that improves it. Why: the pick is what the
// study recommends, but bisect refines the config that holds most
// hypervolume (often a low-latency one), and it moves only toward an
// infeasible trial that measured better; when the best throughput lies
// between the pick and an SLO bound that no trial has crossed nearby, no
// move refines it. Measured throughput near such a bound is also jagged
// in max_num_seqs, with no KV-cache cause (no preemption, KV usage under
// 10%): a closed loop of 256 clients, 300 requests and a 256-request
// warm-up measures 44 requests in a steady window of 5 s out of a 19 s
// span, whose edges fall on completion events that move with the batch
// size. On the A100 short-request scenario (noise-free) it is 2,592 tok/s
// at 150 sequences, 2,483 at 152, 2,425 at 160, 2,254 at 200, TTFT-
// infeasible below 148; so only small steps from the pick find the peak. Levels stay the pick's. ok is false without three feasible
// trials, without an axis correlated by at least minLineCorrelation whose
// line search is not over (lineDone), or when every step was tried.
func (p *Proposer) lineSearch() (spaces.Config, bool) {
	sign := 1.0
	if p.cfg.Objectives[0].Direction == pareto.Minimize {
		sign = -1
	}
	obs, outs := p.samplerObs(), p.samplerOuts()
	var xs [][]float64
	var ys []float64
	best := -1
	for i, o := range obs {
		if !outs[i].feasible {
			continue
		}
		xs, ys = append(xs, p.unitVector(o.Config)), append(ys, sign*outs[i].vals[0])
		if best < 0 || ys[len(ys)-1] > ys[best] {
			best = len(ys) - 1
		}
	}
	if len(xs) < 3 {
		return spaces.Config{}, false
	}
	type axis struct {
		k, dir int
		r      float64
	}
	var axes []axis
	for k, dm := range p.dims {
		if dm.levels != nil {
			continue
		}
		col := make([]float64, len(xs))
		for i, x := range xs {
			col[i] = x[k]
		}
		r := stat.Correlation(col, ys, nil)
		if math.IsNaN(r) || math.Abs(r) < minLineCorrelation {
			continue
		}
		dir := 1
		if r < 0 {
			dir = -1
		}
		axes = append(axes, axis{k, dir, math.Abs(r)})
	}
	axes = slices.DeleteFunc(axes, func(a axis) bool { return lineDone(xs, ys, best, a.k, a.dir) })
	slices.SortStableFunc(axes, func(a, b axis) int { return cmp.Compare(b.r, a.r) })
	seen := map[string]bool{}
	for _, a := range axes {
		for _, s := range lineSteps {
			y := append([]float64(nil), xs[best]...)
			y[a.k] = min(1, max(0, y[a.k]+float64(a.dir)*s))
			if cfg, ok := p.accept(p.fromUnitVector(y), seen); ok {
				return cfg, true
			}
		}
	}
	return spaces.Config{}, false
}
