package tuner

import (
	"context"
	"errors"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// Phase says why a trial ran.
type Phase string

const (
	PhaseSearch Phase = "search" // proposed by the search
	PhaseRepeat Phase = "repeat" // re-measurement of a finalist
)

// FailTrialTimeout is the failure class of a trial that ran past the loop's
// per-trial timeout.
const FailTrialTimeout trial.FailureClass = "trial_timeout"

// Trial is the loop's view of one stored trial. It is a plain record; the
// command adapts the store's own record to it.
type Trial struct {
	ID       string        `json:"id"`     // store key, opaque to the loop
	Number   int           `json:"number"` // 0-based order within the study
	Phase    Phase         `json:"phase"`
	Repeat   int           `json:"repeat"` // re-measurement index (0 for a search trial)
	State    store.State   `json:"state"`
	Config   spaces.Config `json:"config"`
	ConfigID string        `json:"config_id"`
	Result   *trial.Result `json:"result,omitempty"`
	Started  time.Time     `json:"started"`
	Ended    time.Time     `json:"ended,omitzero"`
	Worker   string        `json:"worker,omitempty"` // who ran it, in a shared study
}

// ConfigKey is the ID of the config the trial measured: ConfigID, or
// derived from Config for records written without it.
func (t *Trial) ConfigKey() string {
	if t.ConfigID != "" {
		return t.ConfigID
	}
	return t.Config.ID()
}

// Verdict is the short form shown in progress lines: ok, unstable,
// failed:<class> or interrupted.
func (t Trial) Verdict() string {
	if t.State == store.StateFailed && t.Result != nil {
		return t.Result.String()
	}
	return string(t.State)
}

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
// running) before the engine starts and returns it with ID and Number set;
// Finish writes its final state; both are one transaction each. Trials lists
// the study's trials in Number order.
type Store interface {
	Begin(ctx context.Context, t Trial) (Trial, error)
	Finish(ctx context.Context, t Trial) error
	Trials(ctx context.Context) ([]Trial, error)
}

// ErrStudyExists is returned when a study already has trials and the loop was
// not asked to resume it.
var ErrStudyExists = errors.New("study already has trials (pass --resume to continue it)")
