package store

import (
	"fmt"
	"slices"
	"time"
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
