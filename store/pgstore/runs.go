package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vllm-tuner/tuner/store"
)

// Benchmark runs (migration 4): bench_runs (seq, session, rec) and bench_raw
// (run seq, cell, data), as the bbolt store keeps them. A running run
// whose writer session is gone reads as partial.

// BeginRun: see store.DB.
func (s *Store) BeginRun(ctx context.Context, r *store.Run) (string, error) {
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		seq, err := nextRunSeq(ctx, tx)
		if err != nil {
			return err
		}
		r.Begin(seq, s.session)
		return putRun(ctx, tx, seq, r, true)
	})
	if err != nil {
		return "", s.wrap("begin run", err)
	}
	return r.ID, nil
}

func nextRunSeq(ctx context.Context, tx pgx.Tx) (uint64, error) {
	var seq int64
	err := tx.QueryRow(ctx, "SELECT nextval(pg_get_serial_sequence('bench_runs', 'seq'))").Scan(&seq)
	return uint64(seq), err
}

func putRun(ctx context.Context, tx pgx.Tx, seq uint64, r *store.Run, insert bool) error {
	rec, err := store.MarshalRecord(r)
	if err != nil {
		return err
	}
	q := "UPDATE bench_runs SET rec = $2::text::json, session = $3 WHERE seq = $1"
	if insert {
		q = "INSERT INTO bench_runs (seq, rec, session) VALUES ($1, $2::text::json, $3)"
	}
	var sess *string
	if r.Session != "" {
		sess = &r.Session
	}
	_, err = tx.Exec(ctx, q, int64(seq), string(rec), sess)
	return err
}

func putRaw(ctx context.Context, tx pgx.Tx, seq uint64, cell int, raw []byte) error {
	_, err := tx.Exec(ctx, "INSERT INTO bench_raw (run_seq, cell, data) VALUES ($1, $2, $3)", int64(seq), cell, raw)
	return err
}

// updateRun applies fn to a stored run under its row lock.
func (s *Store) updateRun(ctx context.Context, id string, fn func(tx pgx.Tx, seq uint64, r *store.Run) error) error {
	seq, err := store.ParseRunID(id)
	if err != nil {
		return err
	}
	err = s.tx(ctx, true, func(tx pgx.Tx) error {
		r, err := getRecord(ctx, tx, "run "+id, store.DecodeRun, "SELECT rec::text FROM bench_runs WHERE seq = $1 FOR UPDATE", int64(seq))
		if err != nil {
			return err
		}
		if err := fn(tx, seq, &r); err != nil {
			return err
		}
		return putRun(ctx, tx, seq, &r, false)
	})
	if errors.Is(err, store.ErrRunState) || errors.Is(err, store.ErrNotFound) {
		return err
	}
	return s.wrap("update run "+id, err)
}

// AddCell: see store.DB.
func (s *Store) AddCell(ctx context.Context, id string, c store.CellResult, raw []byte) error {
	return s.updateRun(ctx, id, func(tx pgx.Tx, seq uint64, r *store.Run) error {
		if err := r.AddCell(c, raw); err != nil {
			return err
		}
		return putRaw(ctx, tx, seq, len(r.Cells)-1, raw)
	})
}

// FinishRun: see store.DB.
func (s *Store) FinishRun(ctx context.Context, id string, st store.RunState, reason string, end time.Time) error {
	return s.updateRun(ctx, id, func(_ pgx.Tx, _ uint64, r *store.Run) error {
		return r.Finish(st, reason, end)
	})
}

// ImportRun: see store.DB.
func (s *Store) ImportRun(ctx context.Context, r *store.Run, raws [][]byte) (string, error) {
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		seq, err := nextRunSeq(ctx, tx)
		if err != nil {
			return err
		}
		r.Imported(seq, raws)
		if err := putRun(ctx, tx, seq, r, true); err != nil {
			return err
		}
		for i := range r.Cells {
			if r.Cells[i].RawKey != "" {
				if err := putRaw(ctx, tx, seq, i, raws[i]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return "", s.wrap("import run", err)
	}
	return r.ID, nil
}

// Run: see store.DB ("latest" is the newest run).
func (s *Store) Run(ctx context.Context, id string) (store.Run, error) {
	q, arg := "SELECT rec::text, coalesce(session, '') FROM bench_runs WHERE seq = $1", int64(0)
	if id == "latest" {
		q = "SELECT rec::text, coalesce(session, '') FROM bench_runs WHERE $1 = 0 ORDER BY seq DESC LIMIT 1"
	} else {
		seq, err := store.ParseRunID(id)
		if err != nil {
			return store.Run{}, err
		}
		arg = int64(seq)
	}
	var out []store.Run
	err := s.tx(ctx, false, func(tx pgx.Tx) error {
		var err error
		out, err = s.collectRuns(ctx, tx, q, arg)
		return err
	})
	if err != nil {
		return store.Run{}, s.wrapRead(err)
	}
	if len(out) == 0 {
		return store.Run{}, fmt.Errorf("run %s: %w", id, store.ErrNotFound)
	}
	return out[0], nil
}

// collectRuns reads the runs a query selects (rec, session), a running run
// of a dead session shown partial.
func (s *Store) collectRuns(ctx context.Context, tx pgx.Tx, q string, args ...any) ([]store.Run, error) {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	type row struct {
		rec, session string
	}
	rs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.rec, &x.session)
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.Run, 0, len(rs))
	dead := map[string]bool{}
	for _, x := range rs {
		r, err := store.DecodeRun([]byte(x.rec))
		if err != nil {
			return nil, err
		}
		if r.State == store.RunRunning && x.session != "" && x.session != s.session {
			d, seen := dead[x.session]
			if !seen {
				// The session's advisory lock is free: its process is gone.
				if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock_shared($1, $2)", int32(classSession), lockKey(x.session)).Scan(&d); err != nil {
					return nil, err
				}
				dead[x.session] = d
			}
			if d {
				r.State, r.Reason = store.RunPartial, "the benchmark process died"
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// Runs: see store.DB.
func (s *Store) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	var all []store.Run
	err := s.tx(ctx, false, func(tx pgx.Tx) error {
		var err error
		all, err = s.collectRuns(ctx, tx, "SELECT rec::text, coalesce(session, '') FROM bench_runs ORDER BY seq")
		return err
	})
	if err != nil {
		return nil, s.wrapRead(err)
	}
	var out []store.Run
	for i := range all {
		if f.Match(&all[i]) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// RunRaw: see store.DB.
func (s *Store) RunRaw(ctx context.Context, id string, cell int) ([]byte, error) {
	seq, err := store.ParseRunID(id)
	if err != nil {
		return nil, err
	}
	var out []byte
	err = s.tx(ctx, false, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT data FROM bench_raw WHERE run_seq = $1 AND cell = $2", int64(seq), cell).Scan(&out)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %s cell %d raw data: %w", id, cell, store.ErrNotFound)
	}
	return out, s.wrapRead(err)
}

// Summaries: see store.DB.
func (s *Store) Summaries(ctx context.Context, studyID string, f store.TrialFilter) ([]store.Summary, error) {
	if _, err := s.Study(ctx, studyID); err != nil {
		return nil, err
	}
	all, err := s.summaries(ctx, studyID, f.FromSeq)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for i := range all {
		if f.MatchSummary(&all[i]) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

var _ store.DB = (*Store)(nil)
