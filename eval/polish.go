package eval

import (
	"cmp"
	"context"
	"errors"
	"math"
	"math/rand/v2"
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

// truthFunc evaluates a config noise-free (Evaluator.Truth; a test's
// synthetic problem).
type truthFunc func(context.Context, spaces.Config) (Truth, error)

// polishResult is what polish found.
type polishResult struct {
	front     []frontMember
	evals     int            // configs evaluated
	feasible  int            // of them, SLO-feasible
	failed    map[string]int // by failure class
	converged bool           // every front member probed within the budget
}

// polishStart is the first step of a numeric axis's walk, as a fraction of
// its (log) range; the walk halves it down to one unit (Step, or 1 for ints)
// or, on a continuous axis, to polishFinest of the range.
const (
	polishStart  = 1.0 / 8
	polishFinest = 1.0 / 4096
)

// axisGiveUp: an axis whose first axisGiveUp probes never entered the front
// is probed no more (levels and numeric steps of a flag that does not
// shape the front: most of the budget on fronts of hundreds).
const axisGiveUp = 120

// polishMinShare: a member whose own share of the front's hypervolume is
// below this is not probed. Polished fronts have hundreds of members along
// the VRAM and latency trade-offs, most holding a sliver each; what a probe
// near one can add is of the order of that sliver, far below the truth
// check's slack (TruthSlack).
const polishMinShare = 2e-5

// edgeStarts is the number of starts of the edge descents per objective,
// edgeSample the seeded random configs added to their pool.
const (
	edgeStarts = 20
	edgeSample = 1000
)

// descend improves objective j (direction d) from s by coordinate descent
// (climb), a move kept when the config meets the SLO and is better in j,
// until a sweep keeps none. look evaluates (see polish). A level or layout
// move that is better in j but misses the SLO by at most restoreMax is
// restored before it is judged: a climb from it that keeps moves lowering
// the violation while staying better in j than the config it left, until
// it meets the SLO (restore).
func descend(sp *spaces.Space, s frontMember, j int, d pareto.Direction, look func(string, spaces.Config) (Truth, bool, error)) error {
	cur := s
	_, err := climb(sp, s.cfg, look, func(axis string, c spaces.Config, t Truth) (spaces.Config, bool, error) {
		if t.Vec == nil || !d.Better(t.Vec[j], cur.vec[j]) {
			return c, false, nil
		}
		if !t.Feasible {
			if !levelMove(sp, axis) || t.Violation > restoreMax {
				return c, false, nil
			}
			var err error
			if c, t, err = restore(sp, c, t, j, d, cur.vec[j], look); err != nil || !t.Feasible {
				return c, false, err
			}
		}
		cur = frontMember{cfg: c, vec: t.Vec}
		return c, true, nil
	})
	return err
}

// restoreMax is the largest SLO violation (trial.SLO.Violation) of a probe
// that descend restores. restoreAxis names restore's probes in the
// polish's counts.
const (
	restoreMax  = 0.05
	restoreAxis = "restore"
)

// levelMove reports whether axis is a level axis of sp or the layout move
// (the moves that jump: a numeric walk halves its step at the SLO's bound
// instead).
func levelMove(sp *spaces.Space, axis string) bool {
	if axis == layoutAxis {
		return true
	}
	prm, ok := sp.Param(axis)
	return ok && levelAxis(prm) != nil
}

// restore climbs from c (served, missing the SLO by t.Violation) toward
// the SLO: a move is kept when it lowers the violation and stays better in
// objective j (direction d) than bound, until a config meets the SLO or a
// sweep keeps none; it returns the last config kept and its truth. Why: a
// level move often lands just past a bound that a numeric flag would pull
// back within (the Mistral-7B long-context truth missed long prefills at
// 1,024 tokens with async scheduling, feasible only for batched-token
// budgets near 1,965, whose TTFT p99 is 14% below the front's best: a
// search that found them beat the truth by 15% of its hypervolume).
func restore(sp *spaces.Space, c spaces.Config, t Truth, j int, d pareto.Direction, bound float64, look func(string, spaces.Config) (Truth, bool, error)) (spaces.Config, Truth, error) {
	_, err := climb(sp, c, func(_ string, n spaces.Config) (Truth, bool, error) { return look(restoreAxis, n) },
		func(_ string, n spaces.Config, nt Truth) (spaces.Config, bool, error) {
			if nt.Vec == nil || nt.Violation >= t.Violation || !d.Better(nt.Vec[j], bound) {
				return n, false, nil
			}
			c, t = n, nt
			if t.Feasible {
				return n, true, errRestored // the rest of the sweep is not needed
			}
			return n, true, nil
		})
	if err == errRestored {
		err = nil
	}
	return c, t, err
}

// errRestored ends restore's climb at the first config that meets the SLO.
var errRestored = errors.New("restored")

// climb is the coordinate search of descend and restore: from c, every
// other level of each level axis, walks along each numeric axis and every
// other split of the GPUs between TP and DP (layoutAxis), each probe
// evaluated by look and judged by keep, which returns the config to move
// to (the probe, or where descend restored it) and whether to move, until
// a sweep moves no more. It returns the config it moved to last.
func climb(sp *spaces.Space, c spaces.Config, look func(string, spaces.Config) (Truth, bool, error), keep func(axis string, probe spaces.Config, t Truth) (spaces.Config, bool, error)) (spaces.Config, error) {
	try := func(axis string, n spaces.Config) (bool, error) {
		t, _, err := look(axis, n)
		if err != nil {
			return false, err
		}
		to, ok, err := keep(axis, n, t)
		if ok {
			c = to
		}
		return ok, err
	}
	for moved := true; moved; {
		moved = false
		for _, prm := range sp.Tuned() {
			if lv := levelAxis(prm); lv != nil {
				for _, l := range lv {
					for _, n := range admitted(sp, c.With(prm.Name, l), prm.Name) {
						ok, err := try(prm.Name, n)
						if err != nil {
							return c, err
						}
						moved = moved || ok
					}
				}
				continue
			}
			for _, sign := range []float64{-1, 1} {
				err := walk(sp, c, prm, sign, func(n spaces.Config) (bool, error) {
					ok, err := try(prm.Name, n)
					moved = moved || ok
					return ok, err
				})
				if err != nil {
					return c, err
				}
			}
		}
		for _, n := range sp.Resplits(c) {
			ok, err := try(layoutAxis, n)
			if err != nil {
				return c, err
			}
			moved = moved || ok
		}
	}
	return c, nil
}

// layoutAxis names the coordinate that re-splits the GPUs between TP and
// DP in one move (spaces.Space.Resplits) in the polish's probe counts.
// Changing tensor_parallel_size or data_parallel_size alone cannot: the
// Qwen2-72B truth on 8 H200s (149 points, 144 at TP 4 x DP 2, 5 at 8 x 1)
// was beaten by 1.3% of its hypervolume by an 8 x 1 config a search found.
// Where a config has one layout (one GPU) there is no such move, so the
// polish evaluates exactly what it did before the move existed.
const layoutAxis = "layout"

// levelAnchors is the number of front points (largest hypervolume
// contributions first, and the best throughput) at whose numeric values
// every combination of the discrete levels is evaluated.
const levelAnchors = 3

// polish optimises the noise-free simulator from a sampled front, in three
// stages, each parallel layout (TP x DP) on its own front: a probe at a
// layout "enters the front" when it enters that layout's own front (the
// non-dominated configs evaluated at that layout), and the truth's front is
// the overall front of them all. Edges: single-objective descents from the best configs of pool
// (the sample's feasible configs) and a seeded sample, per objective (see
// descend). Levels: at the numeric values of the levelAnchors front points
// holding the most hypervolume, every combination of the discrete flags'
// levels (a seeded sample of maxCombos of them where the product is
// larger). Refinement: coordinate search around each member of the own
// front of every layout that has a member on the overall front, largest
// hypervolume contribution (to its layout's front) first: every other split
// of the GPUs between TP and DP (layoutAxis), every other level of each
// discrete flag,
// and along each numeric axis in each direction a walk that starts at 1/8
// of the range, keeps its step while the probe enters the front (the
// member moved there) and halves it when not, down to one unit. A config
// that enters the front is itself a member to refine; the search has
// converged when every such member holding polishMinShare of the overall
// front's hypervolume (in its layout's front) was refined, or stops when
// budget evaluations were spent. Axes that never moved the front in
// axisGiveUp probes are left out. Random samples miss
// the configs right at the SLO bounds, which hold most of a front's
// hypervolume; searches find them, so without this the truth was beaten.
// Refining every layout on the front, not only the global front's members:
// the 8 x 1 part of the Qwen2-72B front above held 5 points and a search
// beat it there. With one layout the layouts' fronts are the overall front
// (same members, same order) and the polish is what it was without them.
func polish(ctx context.Context, p *Problem, truth truthFunc, front, pool []frontMember, ref []float64, budget, maxCombos int, seed uint64, progress func(done, total int)) (polishResult, error) {
	res := polishResult{front: slices.Clone(front), failed: map[string]int{}}
	dirs := p.Objectives.Directions()
	seen := map[string]bool{}
	probed := map[string]bool{}
	for _, m := range front {
		seen[m.cfg.ID()] = true
	}
	// own is each layout's own front, the members in the order they joined:
	// the front's, then the pool's that no member of their layout
	// dominates. ComputeTruth's front is the pool's front, so with one
	// layout no pool member joins and own's only front is res.front.
	own := map[spaces.Layout][]frontMember{}
	insert := func(ms *[]frontMember, m frontMember) bool {
		add, drop := pareto.Insert(vecsOf(*ms), m.vec, dirs)
		if !add {
			return false
		}
		for _, i := range slices.Backward(drop) {
			*ms = slices.Delete(*ms, i, i+1)
		}
		*ms = append(*ms, m)
		return true
	}
	// joinOwn inserts m into its layout's own front.
	joinOwn := func(m frontMember) bool {
		l := spaces.LayoutOf(m.cfg)
		ms := own[l]
		ok := insert(&ms, m)
		own[l] = ms
		return ok
	}
	for _, m := range front {
		l := spaces.LayoutOf(m.cfg)
		own[l] = append(own[l], m)
	}
	for _, m := range pool {
		if !seen[m.cfg.ID()] && joinOwn(m) {
			seen[m.cfg.ID()] = true // a member already
		}
	}
	tries, wins := map[string]int{}, map[string]int{}
	errBudget := context.DeadlineExceeded // sentinel: budget spent
	// look evaluates c (once: a config seen before is read from the
	// evaluator's memo) and reports whether it entered the front.
	look := func(axis string, c spaces.Config) (Truth, bool, error) {
		id := c.ID()
		if seen[id] {
			t, err := truth(ctx, c)
			return t, false, err
		}
		if res.evals >= budget {
			return Truth{}, false, errBudget
		}
		if err := ctx.Err(); err != nil {
			return Truth{}, false, err
		}
		seen[id] = true
		res.evals++
		tries[axis]++
		if progress != nil && res.evals%100 == 0 {
			progress(res.evals, budget)
		}
		t, err := truth(ctx, c)
		if err != nil {
			return t, false, err
		}
		switch {
		case t.Vec == nil:
			res.failed[string(t.Failure)]++
			return t, false, nil
		case !t.Feasible:
			return t, false, nil
		}
		res.feasible++
		m := frontMember{cfg: c, vec: t.Vec}
		insert(&res.front, m)
		if !joinOwn(m) {
			return t, false, nil
		}
		wins[axis]++
		return t, true, nil
	}
	try := func(axis string, c spaces.Config) (bool, error) {
		_, joined, err := look(axis, c)
		return joined, err
	}
	tuned := p.Space.Tuned()
	probe := func(m frontMember) error {
		if tries[layoutAxis] < axisGiveUp || wins[layoutAxis] > 0 {
			for _, c := range p.Space.Resplits(m.cfg) {
				if _, err := try(layoutAxis, c); err != nil {
					return err
				}
			}
		}
		for _, prm := range tuned {
			if tries[prm.Name] >= axisGiveUp && wins[prm.Name] == 0 {
				continue
			}
			if lv := levelAxis(prm); lv != nil {
				v, _ := m.cfg.Get(prm.Name)
				for _, l := range lv {
					if l.String() == v.String() {
						continue
					}
					for _, c := range admitted(p.Space, m.cfg.With(prm.Name, l), prm.Name) {
						if _, err := try(prm.Name, c); err != nil {
							return err
						}
					}
				}
				continue
			}
			for _, sign := range []float64{-1, 1} {
				if err := walk(p.Space, m.cfg, prm, sign, func(c spaces.Config) (bool, error) { return try(prm.Name, c) }); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// ranked returns the members of the own fronts of the layouts on the
	// overall front, largest contribution to their layout's front first,
	// the contributions by ID and the overall front's hypervolume.
	ranked := func() ([]frontMember, map[string]float64, float64) {
		// Members with equal objective vectors (flags the simulator
		// ignores) are one point: its contribution counts once.
		uniqOf := func(ms []frontMember) ([][]float64, map[string]int) {
			var uniq [][]float64
			at := map[string]int{}
			for _, m := range ms {
				k := vecKey(m.vec)
				if _, ok := at[k]; !ok {
					at[k] = len(uniq)
					uniq = append(uniq, m.vec)
				}
			}
			return uniq, at
		}
		uniq, _ := uniqOf(res.front)
		total, _ := pareto.Hypervolume(uniq, dirs, ref)
		var layouts []spaces.Layout
		for _, m := range res.front {
			if l := spaces.LayoutOf(m.cfg); !slices.Contains(layouts, l) {
				layouts = append(layouts, l)
			}
		}
		slices.SortFunc(layouts, func(a, b spaces.Layout) int { return cmp.Or(a.TP-b.TP, a.DP-b.DP) })
		byID := map[string]float64{}
		var out []frontMember
		for _, l := range layouts {
			uniq, at := uniqOf(own[l])
			contrib := contributions(uniq, dirs, ref)
			for _, m := range own[l] {
				byID[m.cfg.ID()] = contrib[at[vecKey(m.vec)]]
			}
			out = append(out, own[l]...)
		}
		sort.SliceStable(out, func(a, b int) bool { return byID[out[a].cfg.ID()] > byID[out[b].cfg.ID()] })
		return out, byID, total
	}

	// Edges: from the edgeStarts best feasible configs in each objective
	// (of the starting pool and a seeded sample), a coordinate descent on
	// that objective alone, the SLO kept. The front's edges hold much of
	// the hypervolume against a fixed reference and are multimodal: local
	// moves around front members alone missed configs runs found.
	r := rand.New(rand.NewPCG(seed, 0x6564_6765))
	starts := slices.Clone(pool)
	for n, tries := 0, 0; n < edgeSample && tries < 50*edgeSample; tries++ {
		c, ok := sampleConfig(p.Space, r)
		if !ok {
			continue
		}
		n++
		t, _, err := look("edges", c)
		if err == errBudget {
			return res, nil
		} else if err != nil {
			return res, err
		}
		if t.Feasible {
			starts = append(starts, frontMember{cfg: c, vec: t.Vec})
		}
	}
	for j, d := range dirs {
		sort.SliceStable(starts, func(a, b int) bool { return d.Better(starts[a].vec[j], starts[b].vec[j]) })
		for _, s := range starts[:min(edgeStarts, len(starts))] {
			if err := descend(p.Space, s, j, d, look); err == errBudget {
				return res, nil
			} else if err != nil {
				return res, err
			}
		}
	}

	// Levels.
	all, _, _ := ranked()
	anchors := map[string]frontMember{}
	best := all[0]
	for _, m := range all {
		if m.vec[0] > best.vec[0] {
			best = m
		}
	}
	anchors[vecKey(best.vec)] = best
	for _, m := range all {
		if len(anchors) >= levelAnchors {
			break
		}
		anchors[vecKey(m.vec)] = m
	}
	combos := levelCombos(p.Space, maxCombos, rand.New(rand.NewPCG(seed, 0x6c65_7665)))
	for _, m := range all {
		if _, ok := anchors[vecKey(m.vec)]; !ok || anchors[vecKey(m.vec)].cfg.ID() != m.cfg.ID() {
			continue
		}
		for _, lv := range combos {
			c := m.cfg
			var names []string
			for name, v := range lv {
				c, names = c.With(name, v), append(names, name)
			}
			for _, c := range admitted(p.Space, c, names...) {
				if _, err := try("levels", c); err == errBudget {
					return res, nil
				} else if err != nil {
					return res, err
				}
			}
		}
	}

	// Refinement.
	for {
		order, byID, total := ranked()
		var round []frontMember
		taken := map[string]bool{}
		for _, m := range order {
			if probed[m.cfg.ID()] {
				taken[vecKey(m.vec)] = true
			}
		}
		for _, m := range order {
			k := vecKey(m.vec)
			if probed[m.cfg.ID()] {
				continue
			}
			if byID[m.cfg.ID()] < polishMinShare*total || taken[k] {
				probed[m.cfg.ID()] = true // a sliver, or a point probed already
				continue
			}
			taken[k] = true
			round = append(round, m)
		}
		if len(round) == 0 {
			res.converged = true
			return res, nil
		}
		for _, m := range round {
			probed[m.cfg.ID()] = true
			if err := probe(m); err == errBudget {
				return res, nil
			} else if err != nil {
				return res, err
			}
		}
	}
}

// discreteLevels returns the levels of a parameter drawn level by level (a
// flag with levels, or a stepped number), nil for a continuous axis.
func discreteLevels(prm *spaces.Param) []spaces.Value {
	if lv := prm.Discrete(); len(lv) > 0 && (prm.Kind != spaces.Float || prm.Step > 0) {
		return lv
	}
	return nil
}

// levelAxis returns the levels of a parameter searched level by level (a
// discrete flag of at most 16 levels), nil for a numeric axis.
func levelAxis(prm *spaces.Param) []spaces.Value {
	if lv := discreteLevels(prm); len(lv) <= 16 {
		return lv
	}
	return nil
}

// validConfig normalises c and reports whether the space accepts it.
func validConfig(sp *spaces.Space, c spaces.Config) (spaces.Config, bool) {
	n, err := sp.Normalize(c)
	if err != nil || sp.Validate(n) != nil {
		return spaces.Config{}, false
	}
	return n, true
}

// admitted returns c normalised when the space admits it, else the
// configs nearest it that the space admits with the parameters named in
// keep unchanged (spaces.Space.Repairs): a probe across a constraint
// (chunked prefill off below a max_model_len token budget, a budget below
// max_num_seqs) is repaired, not dropped. Without it the optimiser never
// left chunked prefill on: a search that repaired its moves found a Qwen2-72B
// config on 8 H200s (TP 8, chunked prefill off, 9,683 batched tokens) 2.2%
// of the hypervolume beyond the truth.
func admitted(sp *spaces.Space, c spaces.Config, keep ...string) []spaces.Config {
	n, err := sp.Normalize(c)
	if err != nil {
		return nil
	}
	if sp.Validate(n) == nil {
		return []spaces.Config{n}
	}
	return sp.Repairs(n, keep...)
}

// levelCombos returns every combination of the level axes' values, or max
// of them drawn without replacement when there are more.
func levelCombos(sp *spaces.Space, max int, r *rand.Rand) []map[string]spaces.Value {
	var axes []*spaces.Param
	var levels [][]spaces.Value
	n := 1
	for _, prm := range sp.Tuned() {
		if lv := levelAxis(prm); len(lv) > 1 {
			axes, levels = append(axes, prm), append(levels, lv)
			n *= len(lv)
		}
	}
	combo := func(i int) map[string]spaces.Value {
		m := map[string]spaces.Value{}
		for k, prm := range axes {
			m[prm.Name] = levels[k][i%len(levels[k])]
			i /= len(levels[k])
		}
		return m
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	if max > 0 && n > max {
		r.Shuffle(n, func(a, b int) { idx[a], idx[b] = idx[b], idx[a] })
		idx = idx[:max]
		sort.Ints(idx)
	}
	out := make([]map[string]spaces.Value, len(idx))
	for k, i := range idx {
		out[k] = combo(i)
	}
	return out
}

// walk moves c along a numeric parameter in direction sign (see polish):
// try evaluates a probe and reports whether it entered the front. A probe
// across a constraint is repaired (admitted) and the walk goes on from a
// repair that entered, along the constraint's edge; the range's end and
// probes with no repair that entered count as misses.
func walk(sp *spaces.Space, c spaces.Config, prm *spaces.Param, sign float64, try func(spaces.Config) (bool, error)) error {
	unit := prm.Step
	if unit <= 0 && prm.Kind == spaces.Int {
		unit = 1
	}
	logScale := prm.Log && prm.Min > 0
	span := prm.Max - prm.Min
	if logScale {
		span = math.Log(prm.Max) - math.Log(prm.Min)
	}
	for step := polishStart; ; {
		v, _ := c.Get(prm.Name)
		x := v.Float()
		y := x + sign*step*span
		if logScale && x > 0 {
			y = math.Exp(math.Log(x) + sign*step*span)
		}
		nv := prm.FromFloat(math.Max(prm.Min, math.Min(prm.Max, y)))
		finest := unit <= 0 && step <= polishFinest
		if unit > 0 && math.Abs(nv.Float()-x) <= unit+1e-9 {
			// The step is down to one unit: the last probe.
			nv, finest = prm.FromFloat(math.Max(prm.Min, math.Min(prm.Max, x+sign*unit))), true
		}
		if nv.String() == v.String() {
			return nil // at the range's end
		}
		joined := false
		for _, n := range admitted(sp, c.With(prm.Name, nv), prm.Name) {
			var err error
			if joined, err = try(n); err != nil {
				return err
			}
			if joined {
				c = n
				break
			}
		}
		if joined {
			continue
		}
		if finest {
			return nil
		}
		step /= 2
	}
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
