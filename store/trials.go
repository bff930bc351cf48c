package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// BeginOptions are the optional parts of a new trial.
type BeginOptions struct {
	Repeat int    // re-measurement index of the same config (0 for the first)
	Notes  string // free text
}

// Membership is a worker's view of a shared study it joined.
type Membership struct {
	// Elapsed is the time since the earliest live worker of the study
	// joined: the study-wide wall clock of --budget.
	Elapsed time.Duration
	// Others counts the other live workers.
	Others int
	// HadTrials: the study held trials when the worker joined (read in
	// the join's transaction). Trials that appear later are the
	// campaign's, begun by workers that joined after this one.
	HadTrials bool
}

// ClaimOptions says how a worker of a shared study leases a trial
// (store/pgstore's ClaimTrial).
type ClaimOptions struct {
	Repeat int           // re-measurement index (0: the search trial of the config)
	Worker string        // who runs it: hostname:pid or --worker-name
	Lease  time.Duration // how long the claim holds without a heartbeat
	// MaxSearch refuses a search trial (Repeat 0) when the study has that
	// many search trials running or finished (--trials, study-wide);
	// 0 = no limit.
	MaxSearch int
}

// TrialFilter selects trials; zero fields match everything.
type TrialFilter struct {
	States   []State // any of these states
	ConfigID string
	// FromSeq skips the trials numbered below it: a reader that keeps the
	// finished trials (they never change) rereads only the tail.
	FromSeq uint64
}

func (f TrialFilter) Match(t *Trial) bool {
	if (len(f.States) > 0 && !slices.Contains(f.States, t.State)) || t.Seq < f.FromSeq {
		return false
	}
	return f.ConfigID == "" || f.ConfigID == t.ConfigID
}

// MatchSummary is Match for a trial's summary.
func (f TrialFilter) MatchSummary(sm *Summary) bool {
	if (len(f.States) > 0 && !slices.Contains(f.States, sm.State)) || sm.Seq < f.FromSeq {
		return false
	}
	return f.ConfigID == "" || f.ConfigID == sm.ConfigID
}

// Check refuses options a claim cannot take.
func (o ClaimOptions) Check() error {
	if o.Repeat < 0 || o.Lease <= 0 || o.Worker == "" {
		return fmt.Errorf("claim trial: repeat %d, lease %s, worker %q: want repeat >= 0, a lease and a worker", o.Repeat, o.Lease, o.Worker)
	}
	return nil
}

// Trial is the running trial of cfg that BeginTrial records in studyID
// (its Seq and ID are the backend's to set).
func (o BeginOptions) Trial(studyID string, cfg spaces.Config, started time.Time, session string) (Trial, error) {
	if o.Repeat < 0 {
		return Trial{}, fmt.Errorf("begin trial: negative repeat %d", o.Repeat)
	}
	t := newTrial(studyID, cfg, o.Repeat, started, session)
	t.Notes = o.Notes
	return t, nil
}

// Trial is the running trial of cfg that ClaimTrial records in studyID,
// leased to o.Worker; it refuses options Check refuses.
func (o ClaimOptions) Trial(studyID string, cfg spaces.Config, started time.Time, session string) (Trial, error) {
	if err := o.Check(); err != nil {
		return Trial{}, err
	}
	t := newTrial(studyID, cfg, o.Repeat, started, session)
	t.Worker = o.Worker
	return t, nil
}

func newTrial(studyID string, cfg spaces.Config, repeat int, started time.Time, session string) Trial {
	return Trial{
		V: RecordVersion, StudyID: studyID, State: StateRunning,
		ConfigID: cfg.ID(), Config: cfg, Repeat: repeat,
		Started: started.UTC(), Session: session,
	}
}

// ParseFinish checks what FinishTrial is given (a result that can be
// stored, ErrInvalidResult otherwise) and returns the trial's study and
// sequence number.
func ParseFinish(id string, res *trial.Result) (studyID string, seq uint64, err error) {
	if res == nil {
		return "", 0, fmt.Errorf("finish trial %s: nil result: %w", id, ErrInvalidResult)
	}
	if _, err := json.Marshal(res); err != nil {
		return "", 0, fmt.Errorf("finish trial %s: %w: %v", id, ErrInvalidResult, err)
	}
	return ParseTrialID(id)
}

// Finish records how running trial t ended at now (its state follows from
// res, see StateOf); it fails with ErrState unless t is running.
func (t *Trial) Finish(res *trial.Result, now time.Time) error {
	if t.State != StateRunning {
		return fmt.Errorf("trial is %s: %w", t.State, ErrState)
	}
	t.State, t.Result, t.Ended = StateOf(res), res, now.UTC()
	return nil
}
