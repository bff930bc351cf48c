package boltstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vllm-tuner/tuner/store"
	bolt "go.etcd.io/bbolt"
)

// The service's schedules, created on first use:
//
//	schedules       8-byte big-endian sequence -> store.Schedule
//	schedule_fires  schedule sequence ++ fire sequence (8 bytes each) ->
//	                store.ScheduleFire
var (
	bucketSchedules = []byte("schedules")
	bucketFires     = []byte("schedule_fires")
)

func fireKey(sched, fire uint64) []byte { return append(seqKey(sched), seqKey(fire)...) }

// AddSchedule stores a new schedule; ID, Seq, V, Created and Updated are
// set here.
func (s *Store) AddSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error) {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketSchedules)
		if err != nil {
			return err
		}
		if err := nameFree(tx, b, sc.Name, 0); err != nil {
			return err
		}
		if sc.Seq, err = b.NextSequence(); err != nil {
			return err
		}
		sc.V, sc.ID, sc.Fires = store.RecordVersion, store.ScheduleID(sc.Seq), 0
		sc.Created = s.opts.Now().UTC()
		sc.Updated = sc.Created
		return putJSON(b, seqKey(sc.Seq), sc)
	})
	if err != nil {
		return store.Schedule{}, fmt.Errorf("add schedule %q: %w", sc.Name, err)
	}
	return sc, nil
}

// nameFree fails with ErrExists when a schedule other than seq has name.
func nameFree(tx *bolt.Tx, b *bolt.Bucket, name string, seq uint64) error {
	return b.ForEach(func(_, v []byte) error {
		o, err := store.UnmarshalSchedule(v)
		if err != nil {
			return corrupt(tx, err)
		}
		if o.Name == name && o.Seq != seq {
			return fmt.Errorf("schedule name %q (%s): %w", name, o.ID, store.ErrExists)
		}
		return nil
	})
}

// UpdateSchedule stores an edit of a schedule (store.EditSchedule).
func (s *Store) UpdateSchedule(ctx context.Context, sc store.Schedule) (store.Schedule, error) {
	var out store.Schedule
	err := s.updateSchedule(ctx, sc.ID, func(tx *bolt.Tx, b *bolt.Bucket, stored store.Schedule) (store.Schedule, error) {
		if err := nameFree(tx, b, sc.Name, stored.Seq); err != nil {
			return stored, err
		}
		out = store.EditSchedule(stored, sc, s.opts.Now().UTC())
		return out, nil
	})
	if err != nil {
		return store.Schedule{}, fmt.Errorf("update schedule %s: %w", sc.ID, err)
	}
	return out, nil
}

// updateSchedule replaces schedule id with what fn makes of it.
func (s *Store) updateSchedule(ctx context.Context, id string, fn func(*bolt.Tx, *bolt.Bucket, store.Schedule) (store.Schedule, error)) error {
	seq, err := store.ParseScheduleID(id)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		stored, err := getSchedule(tx, seq)
		if err != nil {
			return err
		}
		b := tx.Bucket(bucketSchedules)
		out, err := fn(tx, b, stored)
		if err != nil {
			return err
		}
		return putJSON(b, seqKey(seq), out)
	})
}

// DeleteSchedule removes a schedule and its fire records.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	seq, err := store.ParseScheduleID(id)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSchedules)
		if b == nil || b.Get(seqKey(seq)) == nil {
			return fmt.Errorf("schedule %s: %w", id, store.ErrNotFound)
		}
		if err := b.Delete(seqKey(seq)); err != nil {
			return err
		}
		fb := tx.Bucket(bucketFires)
		if fb == nil {
			return nil
		}
		prefix := seqKey(seq)
		c := fb.Cursor()
		for k, _ := c.Seek(prefix); k != nil && len(k) == 16 && string(k[:8]) == string(prefix); k, _ = c.Seek(prefix) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

// Schedule returns one schedule by ID.
func (s *Store) Schedule(ctx context.Context, id string) (store.Schedule, error) {
	seq, err := store.ParseScheduleID(id)
	if err != nil {
		return store.Schedule{}, err
	}
	var sc store.Schedule
	err = s.view(ctx, func(tx *bolt.Tx) error {
		sc, err = getSchedule(tx, seq)
		return err
	})
	return sc, err
}

// getSchedule reads schedule seq in tx (ErrNotFound).
func getSchedule(tx *bolt.Tx, seq uint64) (store.Schedule, error) {
	return getRecord(tx, bucketSchedules, seqKey(seq), "schedule "+store.ScheduleID(seq), store.UnmarshalSchedule)
}

// Schedules lists every schedule, oldest first.
func (s *Store) Schedules(ctx context.Context) ([]store.Schedule, error) {
	return list(ctx, s, bucketSchedules, store.UnmarshalSchedule)
}

// FireSchedule records a firing (see store.DB), queueing job with it.
func (s *Store) FireSchedule(ctx context.Context, id string, f store.ScheduleFire, next time.Time, job *store.Job) (store.ScheduleFire, error) {
	err := s.updateSchedule(ctx, id, func(tx *bolt.Tx, _ *bolt.Bucket, stored store.Schedule) (store.Schedule, error) {
		jobID := ""
		if job != nil {
			j := *job
			j.Schedule = id
			j, err := s.addJob(tx, j)
			if err != nil {
				return stored, err
			}
			jobID = j.ID
		}
		out, fire, err := store.FireSchedule(stored, f, next, jobID)
		if err != nil {
			return stored, err
		}
		fb, err := tx.CreateBucketIfNotExists(bucketFires)
		if err != nil {
			return stored, err
		}
		f = fire
		return out, putJSON(fb, fireKey(out.Seq, fire.Seq), fire)
	})
	if err != nil {
		return store.ScheduleFire{}, fmt.Errorf("fire schedule %s: %w", id, err)
	}
	return f, nil
}

// ImportSchedule: see store.DB.
func (s *Store) ImportSchedule(ctx context.Context, sc store.Schedule, fires []store.ScheduleFire) error {
	seq, err := store.CheckImportSchedule(sc, fires)
	if err != nil {
		return err
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketSchedules)
		if err != nil {
			return err
		}
		if err := nameFree(tx, b, sc.Name, 0); err != nil {
			return err
		}
		if err := importRecord(b, seq, "schedule "+sc.ID, sc); err != nil {
			return err
		}
		fb, err := tx.CreateBucketIfNotExists(bucketFires)
		if err != nil {
			return err
		}
		for _, f := range fires {
			if err := putJSON(fb, fireKey(seq, f.Seq), f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("import schedule %s: %w", sc.ID, err)
	}
	return nil
}

// ScheduleFires returns the last n firings of a schedule, oldest first.
func (s *Store) ScheduleFires(ctx context.Context, id string, n int) ([]store.ScheduleFire, error) {
	seq, err := store.ParseScheduleID(id)
	if err != nil {
		return nil, err
	}
	var out []store.ScheduleFire
	err = s.view(ctx, func(tx *bolt.Tx) error {
		if _, err := getSchedule(tx, seq); err != nil {
			return err
		}
		fb := tx.Bucket(bucketFires)
		if fb == nil {
			return nil
		}
		prefix := seqKey(seq)
		c := fb.Cursor()
		// Newest first from the end of the schedule's range, then reversed.
		k, v := c.Seek(fireKey(seq+1, 0))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && string(k[:8]) == string(prefix) && (n <= 0 || len(out) < n); k, v = c.Prev() {
			f, err := store.UnmarshalFire(v)
			if err != nil {
				return corrupt(tx, err)
			}
			out = append(out, f)
		}
		return nil
	})
	slices.Reverse(out)
	return out, err
}
