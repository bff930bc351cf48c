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

func (q HistoryQuery) studies(all []Study) []Study {
	var out []Study
	for _, st := range all {
		k := st.Key
		if k.Model == q.Model && k.GPU == q.GPU && (q.GPUCount <= 0 || k.GPUCount == q.GPUCount) && (q.Engine == "" || k.Engine == q.Engine) {
			out = append(out, st)
		}
	}
	return out
}

func (q HistoryQuery) state(s State) bool {
	if len(q.States) == 0 {
		return s.Finished()
	}
	return slices.Contains(q.States, s)
}

// History returns the summaries of the matching trials, oldest first (by
// start time, then study and sequence). Summaries carry the config, outcome
// and aggregate metrics; the studies (Studies, Study) give the context
// (workload, engine, SLO). HistoryTrials returns the full records.
func (s *Store) History(ctx context.Context, q HistoryQuery) ([]Summary, error) {
	all, err := s.Studies(ctx)
	if err != nil {
		return nil, err
	}
	var out []Summary
	for _, st := range q.studies(all) {
		err := s.scanSummaries(ctx, st.ID, func(sm *Summary) error {
			if q.state(sm.State) {
				out = append(out, *sm)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(out, compareSummary)
	return out, nil
}

func compareSummary(a, b Summary) int {
	if c := a.Started.Compare(b.Started); c != 0 {
		return c
	}
	if c := cmp.Compare(a.StudyID, b.StudyID); c != 0 {
		return c
	}
	return cmp.Compare(a.Seq, b.Seq)
}

// HistoryTrials is History with the full trial records (slower: every
// Result is decoded).
func (s *Store) HistoryTrials(ctx context.Context, q HistoryQuery) ([]Trial, error) {
	all, err := s.Studies(ctx)
	if err != nil {
		return nil, err
	}
	var out []Trial
	for _, st := range q.studies(all) {
		err := s.scanStudy(ctx, st.ID, func(t Trial) error {
			if q.state(t.State) {
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
