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
