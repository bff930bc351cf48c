package tuner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vllm-tuner/tuner/search"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
)

// StudyStore is the loop's Store over one study of a database.
type StudyStore struct {
	Store store.DB
	Study string // study ID
	// Observer receives the time of each write; nil = none.
	Observer Observer
}

var _ Store = StudyStore{}

func (s StudyStore) Begin(ctx context.Context, t Trial) (Trial, error) {
	defer s.observe("begin", time.Now())
	rec, err := s.Store.BeginTrial(ctx, s.Study, t.Config, store.BeginOptions{Repeat: t.Repeat})
	return begun(rec, t.Phase, err)
}

// begun is the loop's view of a trial the store began in phase.
func begun(rec store.Trial, phase Phase, err error) (Trial, error) {
	if err != nil {
		return Trial{}, err
	}
	out := FromStore(rec)
	out.Phase = phase
	return out, nil
}

func (s StudyStore) Finish(ctx context.Context, t Trial) error {
	defer s.observe("finish", time.Now())
	_, err := s.Store.FinishTrial(ctx, t.ID, t.Result)
	return err
}

func (s StudyStore) observe(op string, t0 time.Time) {
	if s.Observer != nil {
		s.Observer.StoreWritten(op, time.Since(t0))
	}
}

func (s StudyStore) Trials(ctx context.Context) ([]Trial, error) {
	ts, err := s.Store.Trials(ctx, s.Study, store.TrialFilter{})
	if err != nil {
		return nil, err
	}
	out := make([]Trial, len(ts))
	for i, t := range ts {
		out[i] = FromStore(t)
	}
	return out, nil
}

// FromStore is the loop's view of a stored trial.
func FromStore(t store.Trial) Trial {
	ph := PhaseSearch
	if t.Repeat > 0 {
		ph = PhaseRepeat
	}
	return Trial{
		ID: t.ID, Number: int(t.Seq), Phase: ph, Repeat: t.Repeat, State: t.State,
		Config: t.Config, ConfigID: t.ConfigID, Result: t.Result, Started: t.Started, Ended: t.Ended,
		Worker: t.Worker,
	}
}

// FromSummary is the loop's view of a trial read from its summary, what
// the list views (trials table, front, recommendation, studies) read: its
// Result is the summary's (outcome, VRAM, serve arguments and the primary
// level's aggregates; see store.Summary.Result), never the full record.
func FromSummary(s *store.Summary) Trial {
	return FromStore(store.Trial{ID: s.ID(), StudyID: s.StudyID, Seq: s.Seq, State: s.State, ConfigID: s.ConfigID,
		Config: s.Config, Repeat: s.Repeat, Result: s.Result(), Started: s.Started, Ended: s.Ended, Worker: s.Worker})
}

// SummaryTrials reads a study's trials as FromSummary sees them, in
// sequence order.
func SummaryTrials(ctx context.Context, db store.DB, studyID string, f store.TrialFilter) ([]Trial, error) {
	sums, err := db.Summaries(ctx, studyID, f)
	if err != nil {
		return nil, err
	}
	out := make([]Trial, len(sums))
	for i := range sums {
		out[i] = FromSummary(&sums[i])
	}
	return out, nil
}

// SearchProposer adapts search.Proposer to the loop: its ErrExhausted ends
// the loop normally (ErrSpaceExhausted).
type SearchProposer struct{ *search.Proposer }

var _ Proposer = SearchProposer{}

func (p SearchProposer) Ask(ctx context.Context) (spaces.Config, error) {
	cfg, err := p.Proposer.Ask(ctx)
	if errors.Is(err, search.ErrExhausted) {
		return cfg, fmt.Errorf("%w: %w", ErrSpaceExhausted, err)
	}
	return cfg, err
}
