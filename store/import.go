package store

import (
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// ErrExists reports an import into a study that already has trials.
var ErrExists = errors.New("already exists")

// CheckImport verifies that trials are a study's complete record set for
// an import: numbered 1..n in order, each belonging to the study.
func CheckImport(st Study, trials []Trial) error {
	for i, t := range trials {
		if t.StudyID != st.ID || t.Seq != uint64(i+1) || t.ID != TrialID(st.ID, t.Seq) {
			return fmt.Errorf("import study %s: trial %d is %s (seq %d): want %s", st.ID, i+1, t.ID, t.Seq, TrialID(st.ID, uint64(i+1)))
		}
		if !t.State.Valid() {
			return fmt.Errorf("import study %s: trial %s has state %q", st.ID, t.ID, t.State)
		}
	}
	return nil
}

// ImportStudy writes a study and all its trials exactly as given (IDs,
// sequence numbers, states, sessions, times) and adds the finished ones to
// the fronts, in one transaction: how `tuner db copy` moves a study from
// another backend. A study that exists with trials is refused (ErrExists);
// running trials stay running until a writer finds their session gone.
func (s *Store) ImportStudy(ctx context.Context, st Study, trials []Trial) error {
	if err := CheckImport(st, trials); err != nil {
		return err
	}
	key, err := st.Key.Normalize()
	if err != nil || key.ID() != st.ID {
		return fmt.Errorf("import study %s: its key does not give its ID", st.ID)
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketStudies)
		if b.Get([]byte(st.ID)) == nil {
			if err := putJSON(b, []byte(st.ID), st); err != nil {
				return err
			}
			if _, err := b.NextSequence(); err != nil {
				return err
			}
		}
		tb, err := tx.Bucket(bucketTrials).CreateBucketIfNotExists([]byte(st.ID))
		if err != nil {
			return err
		}
		if _, err := tx.Bucket(bucketSummaries).CreateBucketIfNotExists([]byte(st.ID)); err != nil {
			return err
		}
		if tb.Sequence() != 0 {
			return fmt.Errorf("study %s has %d trials: %w", st.ID, tb.Sequence(), ErrExists)
		}
		if err := tb.SetSequence(uint64(len(trials))); err != nil {
			return err
		}
		for i := range trials {
			t := &trials[i]
			if err := putTrial(tx, t); err != nil {
				return err
			}
			if t.State == StateRunning {
				if err := tx.Bucket(bucketRunning).Put(runningKey(t.StudyID, t.Seq), []byte(t.Session)); err != nil {
					return err
				}
				continue
			}
			if err := addToFronts(tx, st, *t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("import study %s: %w", st.ID, err)
	}
	return nil
}
