package eval

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
)

// frontMember is a config on the truth's front with its objective vector.
type frontMember struct {
	cfg spaces.Config
	vec []float64
}

func vecsOf(ms []frontMember) [][]float64 {
	out := make([][]float64, len(ms))
	for i, m := range ms {
		out[i] = m.vec
	}
	return out
}

// polishResult is what polish found.
type polishResult struct {
	front     []frontMember
	evals     int            // configs evaluated
	feasible  int            // of them, SLO-feasible
	failed    map[string]int // by failure class
	converged bool           // every front member probed within the budget
}

// Steps of the polish's numeric probes, as fractions of a parameter's (log)
// range, coarse to fine; the finest is then one unit (Step, or 1 for ints).
var polishSteps = []float64{1.0 / 8, 1.0 / 32, 1.0 / 128}

// axisGiveUp: an axis whose first axisGiveUp probes never entered the front
// is probed no more (levels and numeric steps of a flag that does not
// shape the front near it: most of the budget on fronts of hundreds).
const axisGiveUp = 80

// polishMinShare: a member whose own share of the front's hypervolume is
// below this is not probed. Polished fronts have hundreds of members along
// the VRAM and latency trade-offs, most holding a sliver each; what a probe
// near one can add is of the order of that sliver, far below the truth
// check's slack (TruthSlack).
const polishMinShare = 1e-6

// polish improves a sampled front by one-axis probes around each member:
// every other level of each discrete flag, and along each numeric axis in
// each direction steps of 1/8, 1/32 and 1/128 of its range and one unit,
// coarse to fine until one enters the front (a config past an SLO bound or
// dominated tells the next, finer step to try; one that enters is itself
// probed in turn, so a walk to the bound continues from there). Members are
// probed in rounds, largest hypervolume contribution first, until no
// member is left unprobed or budget evaluations were spent. Members holding
// a sliver of the hypervolume (polishMinShare) and axes that never moved
// the front (axisGiveUp) are skipped. Random samples
// miss the configs right at the SLO bounds, which hold most of a front's
// hypervolume; searches find them, so without this the truth was beaten.
func polish(ctx context.Context, p *Problem, ev *Evaluator, front []frontMember, ref []float64, budget int, progress func(done, total int)) (polishResult, error) {
	res := polishResult{front: slices.Clone(front), failed: map[string]int{}}
	dirs := p.Objectives.Directions()
	seen := map[string]bool{}
	probed := map[string]bool{}
	for _, m := range front {
		seen[m.cfg.ID()] = true
	}
	tries, wins := map[string]int{}, map[string]int{}
	errBudget := context.DeadlineExceeded // sentinel: budget spent
	// try evaluates c and reports whether it entered the front.
	try := func(axis string, c spaces.Config) (bool, error) {
		id := c.ID()
		if seen[id] {
			return false, nil
		}
		if res.evals >= budget {
			return false, errBudget
		}
		seen[id] = true
		res.evals++
		tries[axis]++
		if progress != nil && res.evals%100 == 0 {
			progress(res.evals, budget)
		}
		t, err := ev.Truth(ctx, c)
		if err != nil {
			return false, err
		}
		switch {
		case t.Vec == nil:
			res.failed[string(t.Failure)]++
			return false, nil
		case !t.Feasible:
			return false, nil
		}
		res.feasible++
		add, drop := pareto.Insert(vecsOf(res.front), t.Vec, dirs)
		if !add {
			return false, nil
		}
		for _, i := range slices.Backward(drop) {
			res.front = slices.Delete(res.front, i, i+1)
		}
		res.front = append(res.front, frontMember{cfg: c, vec: t.Vec})
		wins[axis]++
		return true, nil
	}
	tuned := p.Space.Tuned()
	probe := func(m frontMember) error {
		for _, prm := range tuned {
			if tries[prm.Name] >= axisGiveUp && wins[prm.Name] == 0 {
				continue
			}
			for _, c := range axisMoves(p.Space, m.cfg, prm) {
				var err error
				joined := false
				for _, step := range c {
					if joined, err = try(prm.Name, step); err != nil || joined {
						break
					}
				}
				if err != nil {
					return err
				}
			}
		}
		return nil
	}
	for {
		var round []frontMember
		for _, m := range res.front {
			if !probed[m.cfg.ID()] {
				round = append(round, m)
			}
		}
		if len(round) == 0 {
			res.converged = true
			return res, nil
		}
		// Members with equal objective vectors (flags the simulator
		// ignores) are one point: its contribution counts once, and one
		// of them is probed.
		var uniq [][]float64
		at := map[string]int{}
		for _, m := range res.front {
			k := fmt.Sprint(m.vec)
			if _, ok := at[k]; !ok {
				at[k] = len(uniq)
				uniq = append(uniq, m.vec)
			}
		}
		contrib := contributions(uniq, dirs, ref)
		total, _ := pareto.Hypervolume(uniq, dirs, ref)
		byID := map[string]float64{}
		taken := map[string]bool{}
		for _, m := range res.front {
			byID[m.cfg.ID()] = contrib[at[fmt.Sprint(m.vec)]]
		}
		for _, m := range res.front {
			if probed[m.cfg.ID()] {
				taken[fmt.Sprint(m.vec)] = true
			}
		}
		round = slices.DeleteFunc(round, func(m frontMember) bool {
			k := fmt.Sprint(m.vec)
			if byID[m.cfg.ID()] < polishMinShare*total || taken[k] {
				probed[m.cfg.ID()] = true // a sliver, or a point probed already
				return true
			}
			taken[k] = true
			return false
		})
		sort.SliceStable(round, func(a, b int) bool { return byID[round[a].cfg.ID()] > byID[round[b].cfg.ID()] })
		for _, m := range round {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			probed[m.cfg.ID()] = true
			if err := probe(m); err == errBudget {
				return res, nil
			} else if err != nil {
				return res, err
			}
		}
	}
}

// axisMoves returns the probes of one parameter around c: for a discrete
// flag one sequence per other level, for a numeric one a sequence per
// direction, coarse to fine (invalid configs left out).
func axisMoves(sp *spaces.Space, c spaces.Config, prm *spaces.Param) [][]spaces.Config {
	valid := func(c spaces.Config) (spaces.Config, bool) {
		n, err := sp.Normalize(c)
		if err != nil || sp.Validate(n) != nil {
			return spaces.Config{}, false
		}
		return n, true
	}
	v, _ := c.Get(prm.Name)
	var out [][]spaces.Config
	if lv := prm.Discrete(); len(lv) > 0 && (prm.Kind != spaces.Float || prm.Step > 0) && len(lv) <= 16 {
		for _, l := range lv {
			if l.String() == v.String() {
				continue
			}
			if n, ok := valid(c.With(prm.Name, l)); ok {
				out = append(out, []spaces.Config{n})
			}
		}
		return out
	}
	x := v.Float()
	unit := prm.Step
	if unit <= 0 && prm.Kind == spaces.Int {
		unit = 1
	}
	for _, sign := range []float64{-1, 1} {
		var seq []spaces.Config
		last := v.String()
		add := func(y float64) {
			y = math.Max(prm.Min, math.Min(prm.Max, y))
			nv := prm.FromFloat(y)
			if nv.String() == last || nv.String() == v.String() {
				return
			}
			if n, ok := valid(c.With(prm.Name, nv)); ok {
				seq = append(seq, n)
				last = nv.String()
			}
		}
		for _, f := range polishSteps {
			if prm.Log && prm.Min > 0 && x > 0 {
				add(math.Exp(math.Log(x) + sign*f*(math.Log(prm.Max)-math.Log(prm.Min))))
			} else {
				add(x + sign*f*(prm.Max-prm.Min))
			}
		}
		if unit > 0 {
			add(x + sign*unit)
		}
		if len(seq) > 0 {
			out = append(out, seq)
		}
	}
	return out
}

// contributions returns each point's exclusive hypervolume (what the front
// loses without it).
func contributions(vecs [][]float64, dirs []pareto.Direction, ref []float64) []float64 {
	all, _ := pareto.Hypervolume(vecs, dirs, ref)
	out := make([]float64, len(vecs))
	rest := make([][]float64, 0, len(vecs))
	for i := range vecs {
		rest = append(rest[:0], vecs[:i]...)
		rest = append(rest, vecs[i+1:]...)
		hv, _ := pareto.Hypervolume(rest, dirs, ref)
		out[i] = all - hv
	}
	return out
}
