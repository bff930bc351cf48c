package store

import (
	"cmp"
	"slices"
	"time"
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

// CompareSummary is History's order: by start time, then study and
// sequence.
func CompareSummary(a, b Summary) int {
	return historyOrder(a.Started, b.Started, a.StudyID, b.StudyID, a.Seq, b.Seq)
}

// CompareTrial is HistoryTrials' order, History's.
func CompareTrial(a, b Trial) int {
	return historyOrder(a.Started, b.Started, a.StudyID, b.StudyID, a.Seq, b.Seq)
}

func historyOrder(ta, tb time.Time, sa, sb string, qa, qb uint64) int {
	if c := ta.Compare(tb); c != 0 {
		return c
	}
	if c := cmp.Compare(sa, sb); c != 0 {
		return c
	}
	return cmp.Compare(qa, qb)
}
