package store

import (
	"cmp"
	"context"
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

// History returns the matching trials, oldest first (by start time, then
// study and sequence).
func (s *Store) History(ctx context.Context, q HistoryQuery) ([]Trial, error) {
	studies, err := s.Studies(ctx)
	if err != nil {
		return nil, err
	}
	var out []Trial
	for _, st := range studies {
		k := st.Key
		if k.Model != q.Model || k.GPU != q.GPU || (q.GPUCount > 0 && k.GPUCount != q.GPUCount) || (q.Engine != "" && k.Engine != q.Engine) {
			continue
		}
		err := s.scanStudy(ctx, st.ID, func(t Trial) error {
			if (len(q.States) == 0 && t.State.Finished()) || slices.Contains(q.States, t.State) {
				out = append(out, t)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(out, func(a, b Trial) int {
		if c := a.Started.Compare(b.Started); c != 0 {
			return c
		}
		if c := cmp.Compare(a.StudyID, b.StudyID); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return out, nil
}
