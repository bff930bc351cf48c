package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// JobState is where a job of the service's queue is.
type JobState string

// Job states.
const (
	JobQueued    JobState = "queued"
	JobRunning   JobState = "running"
	JobDone      JobState = "done"
	JobFailed    JobState = "failed"
	JobCancelled JobState = "cancelled"
)

// Finished reports whether the job will not run again.
func (s JobState) Finished() bool { return s == JobDone || s == JobFailed || s == JobCancelled }

// Job is one queued unit of work of the service: its kind, the request as
// the client sent it (the store does not read it) and its state.
type Job struct {
	V       int             `json:"v"`
	ID      string          `json:"id"`
	Seq     uint64          `json:"seq"`
	Kind    string          `json:"kind"`
	Spec    json.RawMessage `json:"spec"`
	State   JobState        `json:"state"`
	GPUSet  int             `json:"gpu_set"`
	Study   string          `json:"study,omitempty"`
	Error   string          `json:"error,omitempty"`
	Created time.Time       `json:"created"`
	Started time.Time       `json:"started,omitzero"`
	Ended   time.Time       `json:"ended,omitzero"`
	// Runs counts the starts of the job (a restart of the service resumes
	// a running job: Runs > 1).
	Runs int `json:"runs"`
	// BenchRuns are the benchmark runs a bench job stored (one per model
	// of a release tier).
	BenchRuns []string `json:"bench_runs,omitempty"`
	// Schedule is the schedule whose firing queued the job.
	Schedule string `json:"schedule,omitempty"`
	// Gates are the regression gate's verdicts on a scheduled benchmark
	// job's runs, each against the schedule's previous run of its model.
	Gates []JobGate `json:"gates,omitempty"`
}

// JobGate is the regression gate's verdict on one run of a job.
type JobGate struct {
	Run     string `json:"run"`
	Base    string `json:"base,omitempty"` // "": no previous run to compare with
	Model   string `json:"model,omitempty"`
	Verdict string `json:"verdict"` // regression, inconclusive, pass, or none (see Summary)
	// Regressions counts the regressed rows (cell x metric).
	Regressions int    `json:"regressions"`
	Summary     string `json:"summary"`
}

// JobID is the ID of the job with sequence number seq.
func JobID(seq uint64) string { return fmt.Sprintf("job-%d", seq) }

// ParseJobID returns the sequence number of a job ID; a malformed ID is
// ErrNotFound (no job has it).
func ParseJobID(id string) (uint64, error) {
	var seq uint64
	if _, err := fmt.Sscanf(id, "job-%d", &seq); err != nil || JobID(seq) != id {
		return 0, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	return seq, nil
}

// CheckImportJob checks that a copied job's ID and sequence number agree
// (how both backends key it) and returns the number.
func CheckImportJob(j Job) (uint64, error) {
	seq, err := ParseJobID(j.ID)
	if err != nil {
		return 0, fmt.Errorf("import job: %w", err)
	}
	if j.Seq != seq {
		return 0, fmt.Errorf("import job %s: sequence number %d, want %d", j.ID, j.Seq, seq)
	}
	return seq, nil
}
