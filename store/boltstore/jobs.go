package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/vllm-tuner/tuner/store"
	bolt "go.etcd.io/bbolt"
)

// bucketJobs holds the service's job queue: big-endian sequence -> Job
// (JSON). It is created on first use, so a database that never served
// jobs has none.
var bucketJobs = []byte("jobs")

// AddJob appends a job to the queue; ID, Seq, V and a zero Created are set
// here.
func (s *Store) AddJob(ctx context.Context, j store.Job) (store.Job, error) {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var err error
		j, err = s.addJob(tx, j)
		return err
	})
	if err != nil {
		return store.Job{}, fmt.Errorf("add job: %w", err)
	}
	return j, nil
}

func (s *Store) addJob(tx *bolt.Tx, j store.Job) (store.Job, error) {
	b, err := tx.CreateBucketIfNotExists(bucketJobs)
	if err != nil {
		return j, err
	}
	if j.Seq, err = b.NextSequence(); err != nil {
		return j, err
	}
	j.V, j.ID = store.RecordVersion, store.JobID(j.Seq)
	if j.Created.IsZero() {
		j.Created = s.opts.Now().UTC()
	}
	return j, putJSON(b, jobKey(j.Seq), j)
}

// UpdateJob replaces a job that AddJob stored.
func (s *Store) UpdateJob(ctx context.Context, j store.Job) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketJobs)
		if b == nil || b.Get(jobKey(j.Seq)) == nil {
			return fmt.Errorf("job %s: %w", j.ID, store.ErrNotFound)
		}
		return putJSON(b, jobKey(j.Seq), j)
	})
	if err != nil {
		return fmt.Errorf("update job %s: %w", j.ID, err)
	}
	return nil
}

// Jobs returns every job, oldest first.
func (s *Store) Jobs(ctx context.Context) ([]store.Job, error) {
	return list(ctx, s, bucketJobs, decodeJob)
}

// decodeJob decodes a stored job record.
func decodeJob(v []byte) (store.Job, error) {
	var j store.Job
	if err := store.DecodeStrict(v, &j); err != nil {
		return store.Job{}, fmt.Errorf("job record: %w", err)
	}
	return j, nil
}

// Job returns one job by ID.
func (s *Store) Job(ctx context.Context, id string) (store.Job, error) {
	seq, err := store.ParseJobID(id)
	if err != nil {
		return store.Job{}, err
	}
	var j store.Job
	err = s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		j, err = getRecord(tx, bucketJobs, jobKey(seq), "job "+id, decodeJob)
		return err
	})
	return j, err
}

// ImportJob: see store.DB.
func (s *Store) ImportJob(ctx context.Context, j store.Job) error {
	seq, err := store.CheckImportJob(j)
	if err != nil {
		return err
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketJobs)
		if err != nil {
			return err
		}
		return importRecord(b, seq, "job "+j.ID, j)
	})
	if err != nil {
		return fmt.Errorf("import job %s: %w", j.ID, err)
	}
	return nil
}

// importRecord puts v under seq in a bucket numbered by NextSequence
// (ErrExists when taken), moving the sequence past it.
func importRecord(b *bolt.Bucket, seq uint64, what string, v any) error {
	if b.Get(seqKey(seq)) != nil {
		return fmt.Errorf("%s: %w", what, store.ErrExists)
	}
	if err := putJSON(b, seqKey(seq), v); err != nil {
		return err
	}
	if b.Sequence() < seq {
		return b.SetSequence(seq)
	}
	return nil
}

func jobKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }
