package search

import (
	"math"
	"slices"
	"sort"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// Ranked is one config's record over its repeats.
type Ranked struct {
	Config   spaces.Config `json:"config"`
	ID       string        `json:"id"`
	Runs     int           `json:"runs"`     // observations of this config
	Feasible int           `json:"feasible"` // runs that were usable and met the SLO
	Median   []float64     `json:"median"`   // per objective, over usable runs
	MAD      []float64     `json:"mad"`      // median absolute deviation, per objective
	// Conservative is median - k*MAD in each objective's improving direction
	// (median + k*MAD for minimised objectives).
	Conservative []float64 `json:"conservative"`
	Rank         int       `json:"rank"` // 0-based Pareto rank of Conservative among feasible configs; -1 if infeasible
}

// ConservativeRank groups the history by config ID and ranks the configs
// whose runs all met the SLO by the Pareto rank of their conservative
// vectors (median - k*MAD), so a lucky single run does not win. Within a
// rank, configs are ordered by the first objective's conservative value,
// best first; infeasible configs follow with Rank -1. Only observations of
// weight 1 (the study's own context) count.
func ConservativeRank(history []Observation, objs pareto.Objectives, slo trial.SLO, k float64) []Ranked {
	if len(objs) == 0 {
		objs = store.DefaultObjectives("")
	}
	type group struct {
		cfg  spaces.Config
		runs int
		feas int
		vals [][]float64
	}
	byID := map[string]*group{}
	var order []string
	for _, o := range history {
		if o.weight() < 1 {
			continue
		}
		id := o.Config.ID()
		g, ok := byID[id]
		if !ok {
			g = &group{cfg: o.Config}
			byID[id] = g
			order = append(order, id)
		}
		g.runs++
		e := evaluate(o, objs, slo)
		if e.feasible {
			g.feas++
		}
		if !e.failed {
			g.vals = append(g.vals, e.vals)
		}
	}
	var out []Ranked
	for _, id := range order {
		g := byID[id]
		r := Ranked{Config: g.cfg, ID: id, Runs: g.runs, Feasible: g.feas, Rank: -1}
		if len(g.vals) > 0 {
			r.Median, r.MAD, r.Conservative = make([]float64, len(objs)), make([]float64, len(objs)), make([]float64, len(objs))
			for j, ob := range objs {
				col := make([]float64, len(g.vals))
				for i, v := range g.vals {
					col[i] = v[j]
				}
				med := median(col)
				for i := range col {
					col[i] = math.Abs(col[i] - med)
				}
				mad := median(col)
				r.Median[j], r.MAD[j] = med, mad
				if ob.Direction == pareto.Maximize {
					r.Conservative[j] = med - k*mad
				} else {
					r.Conservative[j] = med + k*mad
				}
			}
		}
		out = append(out, r)
	}
	var pts [][]float64
	var idx []int
	for i, r := range out {
		if r.Feasible == r.Runs && r.Runs > 0 && r.Conservative != nil {
			pts = append(pts, r.Conservative)
			idx = append(idx, i)
		}
	}
	if len(pts) > 0 {
		ranks := pareto.Ranks(pts, objs.Directions())
		for k, i := range idx {
			out[i].Rank = ranks[k]
		}
	}
	first := objs[0].Direction
	sort.SliceStable(out, func(a, b int) bool {
		ra, rb := out[a].Rank, out[b].Rank
		if (ra < 0) != (rb < 0) {
			return ra >= 0
		}
		if ra != rb {
			return ra < rb
		}
		if out[a].Conservative == nil || out[b].Conservative == nil {
			return out[a].Conservative != nil
		}
		return first.Better(out[a].Conservative[0], out[b].Conservative[0])
	})
	return out
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	s := slices.Clone(x)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// RepeatCandidates returns up to n configs worth re-measuring before a
// recommendation: the feasible front by conservative score (spread over the
// front when it has more than n members), then the next ranks. Repeats are
// told like any trial; they are exempt from the never-twice rule because the
// caller runs them directly, not through Ask.
func (p *Proposer) RepeatCandidates(n int) []spaces.Config {
	p.mu.Lock()
	hist := append([]Observation(nil), p.history...)
	objs, slo := p.cfg.Objectives, p.cfg.SLO
	p.mu.Unlock()
	if n <= 0 {
		return nil
	}
	ranked := ConservativeRank(hist, objs, slo, 1)
	var out []spaces.Config
	for rank := 0; len(out) < n; rank++ {
		var layer []Ranked
		for _, r := range ranked {
			if r.Rank == rank {
				layer = append(layer, r)
			}
		}
		if len(layer) == 0 {
			break
		}
		if len(out)+len(layer) > n {
			pts := make([][]float64, len(layer))
			for i, r := range layer {
				pts[i] = r.Conservative
			}
			var keep []Ranked
			for _, i := range pareto.SelectDiverse(pts, objs.Directions(), n-len(out)) {
				keep = append(keep, layer[i])
			}
			layer = keep
		}
		for _, r := range layer {
			out = append(out, r.Config)
		}
	}
	return out
}
