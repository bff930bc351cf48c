package boltstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/vllm-tuner/tuner/store"
	bolt "go.etcd.io/bbolt"
	"slices"
)

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	raw, err := store.Encode(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

// EnsureStudy returns the study for key, creating it when new. The key is
// normalised first (default objectives, canonical SLO), so equivalent keys
// give the same stable ID.
func (s *Store) EnsureStudy(ctx context.Context, key store.StudyKey) (store.Study, error) {
	key, err := key.Normalize()
	if err != nil {
		return store.Study{}, err
	}
	st := store.Study{V: store.RecordVersion, ID: key.ID(), Key: key}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketStudies)
		if raw := b.Get([]byte(st.ID)); raw != nil {
			old, err := decodeStudy(raw, false)
			if err != nil {
				return corrupt(tx, err)
			}
			st = old
			return nil
		}
		st.Created = s.opts.Now().UTC()
		if err := putJSON(b, []byte(st.ID), st); err != nil {
			return err
		}
		// The studies bucket's sequence counts the studies, and every
		// study has its (maybe empty) trial buckets: readers tell a lost
		// record or bucket from a study without trials.
		if _, err := b.NextSequence(); err != nil {
			return err
		}
		for _, name := range [][]byte{bucketTrials, bucketSummaries} {
			if _, err := tx.Bucket(name).CreateBucketIfNotExists([]byte(st.ID)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return store.Study{}, fmt.Errorf("ensure study: %w", err)
	}
	return st, nil
}

// Study returns a study by ID.
func (s *Store) Study(ctx context.Context, id string) (store.Study, error) {
	var st store.Study
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		st, err = getStudy(tx, id)
		return err
	})
	return st, err
}

func getStudy(tx *bolt.Tx, id string) (store.Study, error) {
	return getRecord(tx, bucketStudies, []byte(id), "study "+id, func(b []byte) (store.Study, error) { return decodeStudy(b, false) })
}

// Studies lists every study, oldest first.
func (s *Store) Studies(ctx context.Context) ([]store.Study, error) {
	var out []store.Study
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		out, err = allStudies(tx)
		return err
	})
	return out, err
}

func allStudies(tx *bolt.Tx) ([]store.Study, error) {
	var out []store.Study
	b := tx.Bucket(bucketStudies)
	err := b.ForEach(func(k, v []byte) error {
		st, err := decodeStudy(v, false)
		if err != nil {
			return corrupt(tx, err)
		}
		out = append(out, st)
		return nil
	})
	if err == nil && uint64(len(out)) != b.Sequence() {
		err = corrupt(tx, fmt.Errorf("%d study records readable, %d created (records or pages lost)", len(out), b.Sequence()))
	}
	slices.SortStableFunc(out, func(a, b store.Study) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, err
}

// corrupt wraps a decoding error of a record as damage to the file.
func corrupt(tx *bolt.Tx, err error) error {
	if errors.Is(err, store.ErrTooNew) {
		return err
	}
	return &store.CorruptError{Path: tx.DB().Path(), Err: err}
}
