package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vllm-tuner/tuner/store"
)

// nameTaken turns the unique-name violation into ErrExists.
func nameTaken(err error, name string) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		return fmt.Errorf("schedule name %q: %w", name, store.ErrExists)
	}
	return err
}

// AddSchedule stores a new schedule; ID, Seq, V, Created and Updated are
// set here, as the bbolt store sets them.
func (s *Store) AddSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error) {
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		// A taken name is refused before a number is drawn (a sequence
		// does not roll back): IDs run as the bbolt store's do.
		var seq int64
		err := tx.QueryRow(ctx, "SELECT seq FROM schedules WHERE name = $1", sc.Name).Scan(&seq)
		if err == nil {
			return fmt.Errorf("schedule name %q (%s): %w", sc.Name, store.ScheduleID(uint64(seq)), store.ErrExists)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT nextval(pg_get_serial_sequence('schedules', 'seq'))").Scan(&seq); err != nil {
			return err
		}
		sc.Seq, sc.V, sc.ID, sc.Fires = uint64(seq), store.RecordVersion, store.ScheduleID(uint64(seq)), 0
		sc.Created = s.cfg.Now().UTC()
		sc.Updated = sc.Created
		rec, err := store.MarshalRecord(sc)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "INSERT INTO schedules (seq, name, rec) VALUES ($1, $2, $3::text::json)", seq, sc.Name, string(rec))
		return nameTaken(err, sc.Name)
	})
	if err != nil {
		return store.Schedule{}, s.wrap(fmt.Sprintf("add schedule %q", sc.Name), err)
	}
	return sc, nil
}

// lockSchedule reads schedule id for update in tx.
func lockSchedule(ctx context.Context, tx pgx.Tx, id string) (store.Schedule, error) {
	seq, err := store.ParseScheduleID(id)
	if err != nil {
		return store.Schedule{}, err
	}
	return getRecord(ctx, tx, "schedule "+id, store.UnmarshalSchedule, "SELECT rec::text FROM schedules WHERE seq = $1 FOR UPDATE", int64(seq))
}

func putSchedule(ctx context.Context, tx pgx.Tx, sc store.Schedule) error {
	rec, err := store.MarshalRecord(sc)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "UPDATE schedules SET name = $2, rec = $3::text::json WHERE seq = $1", int64(sc.Seq), sc.Name, string(rec))
	return nameTaken(err, sc.Name)
}

// UpdateSchedule stores an edit of a schedule (store.EditSchedule).
func (s *Store) UpdateSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error) {
	var out store.Schedule
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		stored, err := lockSchedule(ctx, tx, sc.ID)
		if err != nil {
			return err
		}
		out = store.EditSchedule(stored, sc, s.cfg.Now().UTC())
		return putSchedule(ctx, tx, out)
	})
	if err != nil {
		return store.Schedule{}, s.wrap("update schedule "+sc.ID, err)
	}
	return out, nil
}

// DeleteSchedule removes a schedule and (by cascade) its fire records.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	seq, err := store.ParseScheduleID(id)
	if err != nil {
		return err
	}
	err = s.tx(ctx, true, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM schedules WHERE seq = $1", int64(seq))
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("schedule %s: %w", id, store.ErrNotFound)
		}
		return err
	})
	return s.wrap("delete schedule "+id, err)
}

// Schedule returns one schedule by ID.
func (s *Store) Schedule(ctx context.Context, id string) (store.Schedule, error) {
	var sc store.Schedule
	err := s.tx(ctx, false, func(tx pgx.Tx) error {
		seq, err := store.ParseScheduleID(id)
		if err != nil {
			return err
		}
		sc, err = getRecord(ctx, tx, "schedule "+id, store.UnmarshalSchedule, "SELECT rec::text FROM schedules WHERE seq = $1", int64(seq))
		return err
	})
	return sc, s.wrapRead(err)
}

// Schedules lists every schedule, oldest first.
func (s *Store) Schedules(ctx context.Context) ([]store.Schedule, error) {
	return list(ctx, s, decodeRows(store.UnmarshalSchedule), "SELECT rec::text FROM schedules ORDER BY seq")
}

// FireSchedule records a firing (see store.DB), queueing job with it; the
// schedule's row lock makes two services firing one slot take turns, and
// the second finds the slot taken (ErrClaimed).
func (s *Store) FireSchedule(ctx context.Context, id string, f store.ScheduleFire, next time.Time, job *store.Job) (store.ScheduleFire, error) {
	err := s.tx(ctx, true, func(tx pgx.Tx) error {
		stored, err := lockSchedule(ctx, tx, id)
		if err != nil {
			return err
		}
		// A refused firing returns an error, which rolls the queued job
		// back with the transaction (as in the bbolt backend).
		jobID := ""
		if job != nil {
			j := *job
			j.Schedule = id
			if j, err = s.addJob(ctx, tx, j); err != nil {
				return err
			}
			jobID = j.ID
		}
		out, fire, err := store.FireSchedule(stored, f, next, jobID)
		if err != nil {
			return err
		}
		rec, err := store.MarshalRecord(fire)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schedule_fires (schedule_seq, seq, rec) VALUES ($1, $2, $3::text::json)", int64(out.Seq), int64(fire.Seq), string(rec)); err != nil {
			return err
		}
		f = fire
		return putSchedule(ctx, tx, out)
	})
	if err != nil {
		return store.ScheduleFire{}, s.wrap("fire schedule "+id, err)
	}
	return f, nil
}

// ImportSchedule: see store.DB.
func (s *Store) ImportSchedule(ctx context.Context, sc store.Schedule, fires []store.ScheduleFire) error {
	seq, err := store.CheckImportSchedule(sc, fires)
	if err != nil {
		return err
	}
	rec, err := store.MarshalRecord(sc)
	if err != nil {
		return err
	}
	err = s.tx(ctx, true, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "INSERT INTO schedules (seq, name, rec) VALUES ($1, $2, $3::text::json) ON CONFLICT (seq) DO NOTHING", int64(seq), sc.Name, string(rec))
		if err != nil {
			return nameTaken(err, sc.Name)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("schedule %s: %w", sc.ID, store.ErrExists)
		}
		rows := make([][]any, len(fires))
		for i, f := range fires {
			rec, err := store.MarshalRecord(f)
			if err != nil {
				return err
			}
			rows[i] = []any{int64(seq), int64(f.Seq), string(rec)}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"schedule_fires"}, []string{"schedule_seq", "seq", "rec"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		return numberAfter(ctx, tx, "schedules", seq)
	})
	return s.wrap("import schedule "+sc.ID, err)
}

// ScheduleFires returns the last n firings of a schedule, oldest first.
func (s *Store) ScheduleFires(ctx context.Context, id string, n int) ([]store.ScheduleFire, error) {
	seq, err := store.ParseScheduleID(id)
	if err != nil {
		return nil, err
	}
	var out []store.ScheduleFire
	err = s.tx(ctx, false, func(tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, "SELECT 1 FROM schedules WHERE seq = $1", int64(seq)).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("schedule %s: %w", id, store.ErrNotFound)
			}
			return err
		}
		var limit *int64 // LIMIT NULL: all
		if n > 0 {
			v := int64(n)
			limit = &v
		}
		rows, err := tx.Query(ctx, "SELECT rec::text FROM schedule_fires WHERE schedule_seq = $1 ORDER BY seq DESC LIMIT $2", int64(seq), limit)
		if err != nil {
			return err
		}
		out, err = decodeRows(store.UnmarshalFire)(rows)
		return err
	})
	slices.Reverse(out)
	return out, s.wrapRead(err)
}
