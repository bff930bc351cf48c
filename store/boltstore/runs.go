package boltstore

import (
	"context"
	"errors"
	"fmt"
	"github.com/vllm-tuner/tuner/store"
	bolt "go.etcd.io/bbolt"
	"slices"
	"time"
)

// Benchmark runs (tuner bench): created on first write, so older files
// need no migration.
//
//	bench_runs  8-byte big-endian sequence (NextSequence) -> store.Run JSON
//	            (ID "r<sequence>")
//	bench_raw   "<run ID>/<cell index>" -> the cell's raw per-request data
//	            (bench.EncodeRaw), written with the cell
var (
	bucketRuns   = []byte("bench_runs")
	bucketRunRaw = []byte("bench_raw")
)

func runKey(id string) ([]byte, error) {
	n, err := store.ParseRunID(id)
	if err != nil {
		return nil, err
	}
	return seqKey(n), nil
}

func rawKey(id string, cell int) []byte { return []byte(store.RawKey(id, cell)) }

// BeginRun stores r as a new run in state running under this Store's
// writer session and returns its ID.
func (s *Store) BeginRun(ctx context.Context, r *store.Run) (string, error) {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketRuns)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketRunRaw); err != nil {
			return err
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		r.Begin(seq, s.session)
		return putJSON(b, seqKey(seq), r)
	})
	if err != nil {
		return "", fmt.Errorf("begin run: %w", err)
	}
	return r.ID, nil
}

// AddCell appends a finished cell and its raw data to a running run, in
// one transaction.
func (s *Store) AddCell(ctx context.Context, id string, c store.CellResult, raw []byte) error {
	return s.updateRun(ctx, id, func(tx *bolt.Tx, r *store.Run) error {
		if err := r.AddCell(c, raw); err != nil {
			return err
		}
		return tx.Bucket(bucketRunRaw).Put([]byte(r.Cells[len(r.Cells)-1].RawKey), raw)
	})
}

// FinishRun records a running run's final state.
func (s *Store) FinishRun(ctx context.Context, id string, st store.RunState, reason string, end time.Time) error {
	return s.updateRun(ctx, id, func(_ *bolt.Tx, r *store.Run) error {
		return r.Finish(st, reason, end)
	})
}

// ImportRun stores a finished run (an imported vLLM bench result) with the
// raw data of its cells (raws[i] for cell i; nil: none) in one transaction.
func (s *Store) ImportRun(ctx context.Context, r *store.Run, raws [][]byte) (string, error) {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketRuns)
		if err != nil {
			return err
		}
		rb, err := tx.CreateBucketIfNotExists(bucketRunRaw)
		if err != nil {
			return err
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		r.Imported(seq, raws)
		for i := range r.Cells {
			if r.Cells[i].RawKey != "" {
				if err := rb.Put([]byte(r.Cells[i].RawKey), raws[i]); err != nil {
					return err
				}
			}
		}
		return putJSON(b, seqKey(seq), r)
	})
	if err != nil {
		return "", fmt.Errorf("import run: %w", err)
	}
	return r.ID, nil
}

func (s *Store) updateRun(ctx context.Context, id string, fn func(tx *bolt.Tx, r *store.Run) error) error {
	key, err := runKey(id)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		r, err := getRecord(tx, bucketRuns, key, "run "+id, decodeRun)
		if err != nil {
			return err
		}
		if err := fn(tx, &r); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketRuns), key, &r)
	})
}

func decodeRun(b []byte) (store.Run, error) {
	if len(b) == 0 || b[0] != store.SealMagic {
		return store.Run{}, errors.New("decode run: record has no checksum envelope")
	}
	return store.DecodeRun(b)
}

// reportState shows a running run whose writer is gone (its session lock
// is free) as partial: its process died, its finished cells stay.
func (s *Store) reportState(r *store.Run) {
	if r.State != store.RunRunning || r.Session == "" || r.Session == s.session {
		return
	}
	l, exists, err := tryLockExisting(s.sessionPath(r.Session))
	if err != nil {
		return
	}
	if l != nil {
		_ = l.unlock()
	}
	if l != nil || !exists {
		r.State, r.Reason = store.RunPartial, "the benchmark process died"
	}
}

// Run returns a run by ID ("r<n>") or "latest".
func (s *Store) Run(ctx context.Context, id string) (store.Run, error) {
	var r store.Run
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		if b == nil {
			return fmt.Errorf("run %s: %w (no benchmark runs yet)", id, store.ErrNotFound)
		}
		var raw []byte
		if id == "latest" {
			_, raw = b.Cursor().Last()
		} else {
			key, err := runKey(id)
			if err != nil {
				return err
			}
			raw = b.Get(key)
		}
		if raw == nil {
			return fmt.Errorf("run %s: %w", id, store.ErrNotFound)
		}
		var err error
		if r, err = decodeRun(raw); err != nil {
			return corrupt(tx, err)
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	s.reportState(&r)
	return r, nil
}

// Runs lists the runs matching f, oldest first.
func (s *Store) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	out, err := list(ctx, s, bucketRuns, decodeRun)
	out = slices.DeleteFunc(out, func(r store.Run) bool { return !f.Match(&r) })
	if len(out) == 0 {
		out = nil // none: nil (`bench list --json` prints null)
	}
	for i := range out {
		s.reportState(&out[i])
	}
	return slices.Clip(out), err
}

// RunRaw returns the raw data of cell i of run id (bench.DecodeRaw reads it).
func (s *Store) RunRaw(ctx context.Context, id string, cell int) ([]byte, error) {
	var out []byte
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRunRaw)
		if b == nil {
			return fmt.Errorf("run %s cell %d raw data: %w", id, cell, store.ErrNotFound)
		}
		v := b.Get(rawKey(id, cell))
		if v == nil {
			return fmt.Errorf("run %s cell %d raw data: %w", id, cell, store.ErrNotFound)
		}
		out = slices.Clone(v)
		return nil
	})
	return out, err
}
