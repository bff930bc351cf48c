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

func (s StudyStore) Begin(ctx context.Context, t store.Trial) (store.Trial, error) {
	defer s.observe("begin", time.Now())
	return s.Store.BeginTrial(ctx, s.Study, t.Config, store.BeginOptions{Repeat: t.Repeat})
}

func (s StudyStore) Finish(ctx context.Context, t store.Trial) error {
	defer s.observe("finish", time.Now())
	_, err := s.Store.FinishTrial(ctx, t.ID, t.Result)
	return err
}

func (s StudyStore) observe(op string, t0 time.Time) {
	if s.Observer != nil {
		s.Observer.StoreWritten(op, time.Since(t0))
	}
}

func (s StudyStore) Trials(ctx context.Context) ([]store.Trial, error) {
	return s.Store.Trials(ctx, s.Study, store.TrialFilter{})
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
