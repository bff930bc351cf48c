package store

import (
	"cmp"
	"slices"
)

// HistoryQuery selects the trials of one model on one GPU type across
// studies (for search-space pruning and surrogate training).
type HistoryQuery struct {
	Model    string
	GPU      string
	GPUCount int     // 0: any count
	Engine   string  // "": any engine
	States   []State // nil: every finished state (not running)
}

func (q HistoryQuery) Studies(all []Study) []Study {
	var out []Study
	for _, st := range all {
		k := st.Key
		if k.Model == q.Model && k.GPU == q.GPU && (q.GPUCount <= 0 || k.GPUCount == q.GPUCount) && (q.Engine == "" || k.Engine == q.Engine) {
			out = append(out, st)
		}
	}
	return out
}

func (q HistoryQuery) State(s State) bool {
	if len(q.States) == 0 {
		return s.Finished()
	}
	return slices.Contains(q.States, s)
}

func CompareSummary(a, b Summary) int {
	if c := a.Started.Compare(b.Started); c != 0 {
		return c
	}
	if c := cmp.Compare(a.StudyID, b.StudyID); c != 0 {
		return c
	}
	return cmp.Compare(a.Seq, b.Seq)
}
