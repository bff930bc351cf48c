package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vllm-tuner/tuner/bench"
)

// Benchmark runs (tuner bench): created on first write, so older files
// need no migration.
//
//	bench_runs  8-byte big-endian sequence (NextSequence) -> bench.Run JSON
//	            (ID "r<sequence>")
//	bench_raw   "<run ID>/<cell index>" -> the cell's raw per-request data
//	            (bench.EncodeRaw), written with the cell
var (
	bucketRuns   = []byte("bench_runs")
	bucketRunRaw = []byte("bench_raw")
)

// ErrRunState reports an operation on a run in the wrong state.
var ErrRunState = errors.New("wrong run state")

// RunFilter selects runs for Runs (empty fields match all).
type RunFilter struct {
	Model  string
	Tier   string
	Labels map[string]string
}

func runKey(id string) ([]byte, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(id, "r"), 10, 64)
	if err != nil || !strings.HasPrefix(id, "r") || n == 0 {
		return nil, fmt.Errorf("run %q: %w (want r<number>)", id, ErrNotFound)
	}
	return seqKey(n), nil
}

func rawKey(id string, cell int) []byte { return []byte(id + "/" + strconv.Itoa(cell)) }

// BeginRun stores r as a new run in state running under this Store's
// writer session and returns its ID.
func (s *Store) BeginRun(ctx context.Context, r *bench.Run) (string, error) {
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
		r.ID, r.V, r.Session = "r"+strconv.FormatUint(seq, 10), bench.RunVersion, s.session
		if r.State == "" {
			r.State = bench.StateRunning
		}
		return putJSON(b, seqKey(seq), r)
	})
	if err != nil {
		return "", fmt.Errorf("begin run: %w", err)
	}
	return r.ID, nil
}

// AddCell appends a finished cell and its raw data to a running run, in
// one transaction.
func (s *Store) AddCell(ctx context.Context, id string, c bench.CellResult, raw []byte) error {
	return s.updateRun(ctx, id, func(tx *bolt.Tx, r *bench.Run) error {
		if r.State != bench.StateRunning {
			return fmt.Errorf("run %s is %s: %w", id, r.State, ErrRunState)
		}
		c.RawKey = string(rawKey(id, len(r.Cells)))
		c.RawBytes = len(raw)
		if err := tx.Bucket(bucketRunRaw).Put([]byte(c.RawKey), raw); err != nil {
			return err
		}
		r.Cells = append(r.Cells, c)
		return nil
	})
}

// FinishRun records a running run's final state.
func (s *Store) FinishRun(ctx context.Context, id string, st bench.State, reason string, end time.Time) error {
	return s.updateRun(ctx, id, func(_ *bolt.Tx, r *bench.Run) error {
		if r.State != bench.StateRunning {
			return fmt.Errorf("run %s is %s: %w", id, r.State, ErrRunState)
		}
		r.State, r.Reason, r.End, r.Session = st, reason, end, ""
		return nil
	})
}

// ImportRun stores a finished run (an imported vLLM bench result) with the
// raw data of its cells (raws[i] for cell i; nil: none) in one transaction.
func (s *Store) ImportRun(ctx context.Context, r *bench.Run, raws [][]byte) (string, error) {
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
		r.ID, r.V = "r"+strconv.FormatUint(seq, 10), bench.RunVersion
		for i := range r.Cells {
			if i < len(raws) && raws[i] != nil {
				r.Cells[i].RawKey, r.Cells[i].RawBytes = string(rawKey(r.ID, i)), len(raws[i])
				if err := rb.Put(rawKey(r.ID, i), raws[i]); err != nil {
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

func (s *Store) updateRun(ctx context.Context, id string, fn func(tx *bolt.Tx, r *bench.Run) error) error {
	key, err := runKey(id)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		if b == nil || b.Get(key) == nil {
			return fmt.Errorf("run %s: %w", id, ErrNotFound)
		}
		r, err := decodeRun(b.Get(key))
		if err != nil {
			return corrupt(tx, err)
		}
		if err := fn(tx, &r); err != nil {
			return err
		}
		return putJSON(b, key, &r)
	})
}

func decodeRun(b []byte) (bench.Run, error) {
	var r bench.Run
	if err := decodeStrict(b, &r); err != nil {
		return r, fmt.Errorf("decode run: %w", err)
	}
	if r.V > bench.RunVersion {
		return r, fmt.Errorf("decode run %s: record version %d: %w", r.ID, r.V, ErrTooNew)
	}
	if r.V < 1 {
		return r, fmt.Errorf("decode run %s: record version %d", r.ID, r.V)
	}
	return r, nil
}

// reportState shows a running run whose writer is gone (its session lock
// is free) as partial: its process died, its finished cells stay.
func (s *Store) reportState(r *bench.Run) {
	if r.State != bench.StateRunning || r.Session == "" || r.Session == s.session {
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
		r.State, r.Reason = bench.StatePartial, "the benchmark process died"
	}
}

// Run returns a run by ID ("r<n>") or "latest".
func (s *Store) Run(ctx context.Context, id string) (bench.Run, error) {
	var r bench.Run
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		if b == nil {
			return fmt.Errorf("run %s: %w (no benchmark runs yet)", id, ErrNotFound)
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
			return fmt.Errorf("run %s: %w", id, ErrNotFound)
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
func (s *Store) Runs(ctx context.Context, f RunFilter) ([]bench.Run, error) {
	var out []bench.Run
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			r, err := decodeRun(v)
			if err != nil {
				return corrupt(tx, err)
			}
			if f.Model != "" && r.Model != f.Model || f.Tier != "" && r.Tier != f.Tier {
				return nil
			}
			for k, want := range f.Labels {
				if got, ok := r.Labels[k]; !ok || (want != "" && got != want) {
					return nil
				}
			}
			out = append(out, r)
			return nil
		})
	})
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
			return fmt.Errorf("run %s cell %d raw data: %w", id, cell, ErrNotFound)
		}
		v := b.Get(rawKey(id, cell))
		if v == nil {
			return fmt.Errorf("run %s cell %d raw data: %w", id, cell, ErrNotFound)
		}
		out = slices.Clone(v)
		return nil
	})
	return out, err
}

var _ bench.Sink = (*Store)(nil)
