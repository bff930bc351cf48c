package boltstore

import (
	"context"
	"github.com/vllm-tuner/tuner/store"
	"slices"
)

// History returns the summaries of the matching trials, oldest first (by
// start time, then study and sequence). Summaries carry the config, outcome
// and aggregate metrics; the studies (Studies, Study) give the context
// (workload, engine, SLO). HistoryTrials returns the full records.
func (s *Store) History(ctx context.Context, q store.HistoryQuery) ([]store.Summary, error) {
	all, err := s.Studies(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.Summary
	for _, st := range q.Studies(all) {
		err := s.scanSummaries(ctx, st.ID, func(sm *store.Summary) error {
			if q.State(sm.State) {
				out = append(out, *sm)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(out, store.CompareSummary)
	return out, nil
}

// HistoryTrials is History with the full trial records (slower: every
// Result is decoded).
func (s *Store) HistoryTrials(ctx context.Context, q store.HistoryQuery) ([]store.Trial, error) {
	all, err := s.Studies(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.Trial
	for _, st := range q.Studies(all) {
		err := s.scanStudy(ctx, st.ID, func(t store.Trial) error {
			if q.State(t.State) {
				out = append(out, t)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(out, store.CompareTrial)
	return out, nil
}
