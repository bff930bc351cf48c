package store

import (
	"cmp"
	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/trial"
	"math"
	"slices"
)

// Group names a cross-study front: one model on one GPU setup, one list of
// objectives.
type Group struct {
	Model      string            `json:"model"`
	GPU        string            `json:"gpu"`
	GPUCount   int               `json:"gpu_count"`
	Objectives pareto.Objectives `json:"objectives"`
}

// Key is the group's front key (see StudyKey.GroupKey).
func (g Group) Key() string {
	if g.GPUCount <= 0 {
		g.GPUCount = 1
	}
	if len(g.Objectives) == 0 {
		g.Objectives = DefaultObjectives("")
	}
	return StudyKey{Model: g.Model, GPU: g.GPU, GPUCount: g.GPUCount, Objectives: g.Objectives}.GroupKey()
}

// Group returns the cross-study group a study feeds.
func (k StudyKey) Group() Group {
	return Group{Model: k.Model, GPU: k.GPU, GPUCount: k.GPUCount, Objectives: k.Objectives}
}
func SortPoints(ps []Point) {
	slices.SortFunc(ps, func(a, b Point) int {
		if c := cmp.Compare(a.StudyID, b.StudyID); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
}

// FrontQuery filters a front query. The zero query returns the maintained
// front (state ok, the study's own SLO).
type FrontQuery struct {
	// SLO, when set, must hold too (on top of each study's own SLO); the
	// front is then recomputed from the trials, since a stricter SLO can
	// bring trials that were dominated back into the front.
	SLO trial.SLO
	// IncludeUnstable admits trials in state unstable (recomputed too).
	IncludeUnstable bool
}

func (q FrontQuery) Maintained() bool { return len(q.SLO) == 0 && !q.IncludeUnstable }

// eligible returns the front point of t under st's objectives and SLO and
// the query's extra conditions.
func Eligible(st Study, slo trial.SLO, t *Trial, q FrontQuery) (Point, bool) {
	if t.Result == nil {
		return Point{}, false
	}
	return eligibleOf(st, slo, q, t.State, t.Result.Objective, t.Result.Metrics,
		Point{TrialID: t.ID, StudyID: t.StudyID, Seq: t.Seq, ConfigID: t.ConfigID, Config: t.Config})
}

// eligibleSummary is eligible for a trial summary; the two agree on every
// trial (Check verifies summaries against trials).
func EligibleSummary(st Study, slo trial.SLO, sm *Summary, q FrontQuery) (Point, bool) {
	return eligibleOf(st, slo, q, sm.State, sm.Objective, sm.Metrics,
		Point{TrialID: sm.ID(), StudyID: sm.StudyID, Seq: sm.Seq, ConfigID: sm.ConfigID, Config: sm.Config})
}

func eligibleOf(st Study, slo trial.SLO, q FrontQuery, state State, objective func(string) (float64, bool), metrics func() *trial.Metrics, p Point) (Point, bool) {
	switch {
	case state == StateOK:
	case state == StateUnstable && q.IncludeUnstable:
	default:
		return Point{}, false
	}
	vals := make([]float64, len(st.Key.Objectives))
	for i, o := range st.Key.Objectives {
		x, ok := objective(o.Name)
		if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
			return Point{}, false
		}
		vals[i] = x
	}
	if len(slo) > 0 || len(q.SLO) > 0 {
		m := metrics()
		if m == nil {
			return Point{}, false
		}
		if ok, _ := slo.Check(m); !ok {
			return Point{}, false
		}
		if ok, _ := q.SLO.Check(m); !ok {
			return Point{}, false
		}
	}
	p.Values = vals
	return p, true
}

// frontOf computes the front of candidate points with the pareto package.
func FrontOf(key string, objs pareto.Objectives, cands []Point) Front {
	vecs := make([][]float64, len(cands))
	for i, p := range cands {
		vecs[i] = p.Values
	}
	f := Front{V: RecordVersion, Key: key, Objectives: objs, Points: []Point{}}
	for _, i := range pareto.Front(vecs, objs.Directions()) {
		f.Points = append(f.Points, cands[i])
	}
	SortPoints(f.Points)
	return f
}

// groupStudies returns the studies feeding group key g.
func GroupStudies(studies []Study, g string) []Study {
	var out []Study
	for _, st := range studies {
		if st.Key.GroupKey() == g {
			out = append(out, st)
		}
	}
	return out
}

// frontsFrom builds every study and group front from each study's eligible
// points.
func FrontsFrom(studies []Study, candsByStudy map[string][]Point) map[string]Front {
	out := map[string]Front{}
	byGroup := map[string][]Point{}
	groupObjs := map[string]pareto.Objectives{}
	for _, st := range studies {
		cands := candsByStudy[st.ID]
		name := "study/" + st.ID
		out[name] = FrontOf(name, st.Key.Objectives, cands)
		g := st.Key.GroupKey()
		byGroup[g] = append(byGroup[g], out[name].Points...) // a group front is the front of its studies' fronts
		groupObjs[g] = st.Key.Objectives
	}
	for g, ps := range byGroup {
		name := "group/" + g
		out[name] = FrontOf(name, groupObjs[g], ps)
	}
	return out
}
