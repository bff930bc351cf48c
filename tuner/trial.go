package tuner

import (
	"context"
	"errors"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// Phase says why a trial ran: a stored trial with Repeat > 0 is a
// re-measurement (phaseOf).
type Phase string

const (
	PhaseSearch Phase = "search" // proposed by the search
	PhaseRepeat Phase = "repeat" // re-measurement of a finalist
)

// phaseOf is the phase a stored trial ran in.
func phaseOf(t store.Trial) Phase {
	if t.Repeat > 0 {
		return PhaseRepeat
	}
	return PhaseSearch
}

// FailTrialTimeout is the failure class of a trial that ran past the loop's
// per-trial timeout.
const FailTrialTimeout trial.FailureClass = "trial_timeout"

// Runner runs one trial: start the engine with cfg, drive w, stop the engine.
// A failed engine is a Result with Status failed; the error is for
// infrastructure problems and cancellation (then the Result, if any, says
// trial.FailInterrupted). Implemented by trial.Runner (a real process) and
// sim.Runner (virtual clock).
type Runner interface {
	Run(ctx context.Context, cfg spaces.Config, w trial.Workload) (trial.Result, error)
}

// Proposer chooses the next config and learns from results. Implemented by
// package search.
type Proposer interface {
	Ask(ctx context.Context) (spaces.Config, error)
	Tell(cfg spaces.Config, res *trial.Result)
}

// ErrSpaceExhausted is returned (wrapped) by a Proposer that has nothing new
// to propose; the loop stops normally.
var ErrSpaceExhausted = errors.New("search space exhausted")

// Store persists the trials of one study. Begin writes a new record (state
// running) before the engine starts and returns it with ID and Seq set;
// Finish writes its final state; both are one transaction each. Trials lists
// the study's trials in Seq order.
type Store interface {
	Begin(ctx context.Context, t store.Trial) (store.Trial, error)
	Finish(ctx context.Context, t store.Trial) error
	Trials(ctx context.Context) ([]store.Trial, error)
}

// ErrStudyExists is returned when a study already has trials and the loop was
// not asked to resume it.
var ErrStudyExists = errors.New("study already has trials (pass --resume to continue it)")
