package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/vllm-tuner/tuner/store"
)

// AddJob appends a job to the service's queue; ID, Seq, V and a zero
// Created are set here, as the bbolt store sets them.
func (s *Store) AddJob(ctx context.Context, j store.Job) (store.Job, error) {
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		var err error
		j, err = s.addJob(ctx, tx, j)
		return err
	})
	if err != nil {
		return store.Job{}, s.wrap("add job", err)
	}
	return j, nil
}

func (s *Store) addJob(ctx context.Context, tx pgx.Tx, j store.Job) (store.Job, error) {
	var seq int64
	if err := tx.QueryRow(ctx, "SELECT nextval(pg_get_serial_sequence('jobs', 'seq'))").Scan(&seq); err != nil {
		return j, err
	}
	j.Seq, j.V, j.ID = uint64(seq), store.RecordVersion, store.JobID(uint64(seq))
	if j.Created.IsZero() {
		j.Created = s.cfg.Now().UTC()
	}
	rec, err := store.MarshalRecord(j)
	if err != nil {
		return j, err
	}
	_, err = tx.Exec(ctx, "INSERT INTO jobs (seq, rec) VALUES ($1, $2::text::json)", seq, string(rec))
	return j, err
}

// UpdateJob replaces a job that AddJob stored.
func (s *Store) UpdateJob(ctx context.Context, j store.Job) error {
	rec, err := store.MarshalRecord(j)
	if err != nil {
		return err
	}
	err = s.tx(ctx, true, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "UPDATE jobs SET rec = $2::text::json WHERE seq = $1", int64(j.Seq), string(rec))
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("job %s: %w", j.ID, store.ErrNotFound)
		}
		return err
	})
	return s.wrapRead(err)
}

// Jobs returns every job, oldest first.
func (s *Store) Jobs(ctx context.Context) ([]store.Job, error) {
	return list(ctx, s, decodeRows(store.UnmarshalJob), "SELECT rec::text FROM jobs ORDER BY seq")
}

// Job returns one job by ID.
func (s *Store) Job(ctx context.Context, id string) (store.Job, error) {
	seq, err := store.ParseJobID(id)
	if err != nil {
		return store.Job{}, err
	}
	var j store.Job
	err = s.tx(ctx, false, func(tx pgx.Tx) error {
		j, err = getRecord(ctx, tx, "job "+id, store.UnmarshalJob, "SELECT rec::text FROM jobs WHERE seq = $1", int64(seq))
		return err
	})
	return j, s.wrapRead(err)
}

// ImportJob: see store.DB.
func (s *Store) ImportJob(ctx context.Context, j store.Job) error {
	seq, err := store.CheckImportJob(j)
	if err != nil {
		return err
	}
	rec, err := store.MarshalRecord(j)
	if err != nil {
		return err
	}
	err = s.tx(ctx, true, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "INSERT INTO jobs (seq, rec) VALUES ($1, $2::text::json) ON CONFLICT (seq) DO NOTHING", int64(seq), string(rec))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("job %s: %w", j.ID, store.ErrExists)
		}
		return numberAfter(ctx, tx, "jobs", seq)
	})
	return s.wrap("import job "+j.ID, err)
}

// numberAfter moves the serial of table's seq column past seq (an imported
// row's number), so the next row added is numbered after it.
func numberAfter(ctx context.Context, tx pgx.Tx, table string, seq uint64) error {
	_, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence($1, 'seq'), $2)
		WHERE $2 > coalesce(pg_sequence_last_value(pg_get_serial_sequence($1, 'seq')::regclass), 0)`, table, int64(seq))
	return err
}
