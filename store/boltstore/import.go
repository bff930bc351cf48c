package boltstore

import (
	"context"
	"fmt"
	"github.com/vllm-tuner/tuner/store"
	bolt "go.etcd.io/bbolt"
)

// ImportStudy writes a study and all its trials exactly as given (IDs,
// sequence numbers, states, sessions, times) and adds the finished ones to
// the fronts, in one transaction: how `tuner db copy` moves a study from
// another backend. A study that exists with trials is refused (ErrExists);
// running trials stay running until a writer finds their session gone.
func (s *Store) ImportStudy(ctx context.Context, st store.Study, trials []store.Trial) error {
	if err := store.CheckImport(st, trials); err != nil {
		return err
	}
	var size int64 // what the records will take, about: their JSON
	for i := range trials {
		if r := trials[i].Result; r != nil {
			size += 4 << 10 * int64(len(r.Levels)+1)
		}
	}
	err := s.updateGrowing(ctx, size, func(tx *bolt.Tx) error {
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
			return fmt.Errorf("study %s has %d trials: %w", st.ID, tb.Sequence(), store.ErrExists)
		}
		if err := tb.SetSequence(uint64(len(trials))); err != nil {
			return err
		}
		var points []store.Point
		slo := st.SLO()
		for i := range trials {
			t := &trials[i]
			if err := putTrial(tx, t); err != nil {
				return err
			}
			if t.State == store.StateRunning {
				if err := tx.Bucket(bucketRunning).Put(runningKey(t.StudyID, t.Seq), []byte(t.Session)); err != nil {
					return err
				}
				continue
			}
			if p, ok := store.Eligible(st, slo, t, store.FrontQuery{}); ok {
				points = append(points, p)
			}
		}
		// The fronts take the import's points in one pass (one per trial
		// re-encoded the whole front each time: quadratic).
		objs, g := st.Key.Objectives, st.Key.GroupKey()
		if err := insertPoints(tx, studyFrontKey(st.ID), store.StudyFrontName(st.ID), objs, points); err != nil {
			return err
		}
		return insertPoints(tx, groupFrontKey(g), store.GroupFrontName(g), objs, points)
	})
	if err != nil {
		return fmt.Errorf("import study %s: %w", st.ID, err)
	}
	return nil
}
