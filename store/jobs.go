package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketJobs holds the service's job queue: big-endian sequence -> Job
// (JSON). It is created on first use, so a database that never served
// jobs has none.
var bucketJobs = []byte("jobs")

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
}

// AddJob appends a job to the queue; ID, Seq, V and a zero Created are set
// here.
func (s *Store) AddJob(ctx context.Context, j Job) (Job, error) {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketJobs)
		if err != nil {
			return err
		}
		if j.Seq, err = b.NextSequence(); err != nil {
			return err
		}
		j.V, j.ID = RecordVersion, JobID(j.Seq)
		if j.Created.IsZero() {
			j.Created = s.opts.Now().UTC()
		}
		return putJSON(b, jobKey(j.Seq), j)
	})
	if err != nil {
		return Job{}, fmt.Errorf("add job: %w", err)
	}
	return j, nil
}

// UpdateJob replaces a job that AddJob stored.
func (s *Store) UpdateJob(ctx context.Context, j Job) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		if b == nil || b.Get(jobKey(j.Seq)) == nil {
			return fmt.Errorf("job %s: %w", j.ID, ErrNotFound)
		}
		return putJSON(b, jobKey(j.Seq), j)
	})
	if err != nil {
		return fmt.Errorf("update job %s: %w", j.ID, err)
	}
	return nil
}

// Jobs returns every job, oldest first.
func (s *Store) Jobs(ctx context.Context) ([]Job, error) {
	var out []Job
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var j Job
			if err := decodeStrict(v, &j); err != nil {
				return corrupt(tx, fmt.Errorf("job record: %w", err))
			}
			out = append(out, j) // decoding copies: v is not kept
			return nil
		})
	})
	return out, err
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

// Job returns one job by ID.
func (s *Store) Job(ctx context.Context, id string) (Job, error) {
	seq, err := ParseJobID(id)
	if err != nil {
		return Job{}, err
	}
	var j Job
	err = s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		var v []byte
		if b != nil {
			v = b.Get(jobKey(seq))
		}
		if v == nil {
			return fmt.Errorf("job %s: %w", id, ErrNotFound)
		}
		if err := decodeStrict(v, &j); err != nil {
			return corrupt(tx, fmt.Errorf("job record: %w", err))
		}
		return nil
	})
	return j, err
}

func jobKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }
