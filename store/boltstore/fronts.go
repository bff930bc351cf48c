package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/store"
	bolt "go.etcd.io/bbolt"
	"math"
	"slices"
)

func studyFrontKey(id string) []byte  { return []byte("study/" + id) }
func groupFrontKey(key string) []byte { return []byte("group/" + key) }

// insertPoint updates front record key with p (incremental maintenance).
func insertPoint(tx *bolt.Tx, key []byte, name string, objs pareto.Objectives, p store.Point) error {
	b := tx.Bucket(bucketFronts)
	f := store.Front{V: store.RecordVersion, Key: name, Objectives: objs, Points: []store.Point{}}
	raw := b.Get(key)
	if raw != nil {
		// Most trials do not enter the front: decide on the cached vectors
		// alone, without decoding the front's JSON.
		vecs, err := decodeSealedVectors(tx.Bucket(bucketFrontVecs).Get(key))
		if err != nil {
			return corrupt(tx, fmt.Errorf("front %s vectors: %w", name, err))
		}
		if add, _ := pareto.Insert(vecs, p.Values, objs.Directions()); !add {
			return nil
		}
	}
	if raw != nil {
		var err error
		if f, err = decodeFront(raw, false); err != nil {
			return corrupt(tx, err)
		}
		if !f.Objectives.Equal(objs) {
			return corrupt(tx, fmt.Errorf("front %s has objectives %s, want %s", name, f.Objectives, objs))
		}
	}
	add, drop := pareto.Insert(f.Vectors(), p.Values, objs.Directions())
	if !add {
		return nil
	}
	for k := len(drop) - 1; k >= 0; k-- {
		f.Points = slices.Delete(f.Points, drop[k], drop[k]+1)
	}
	f.Points = append(f.Points, p)
	store.SortPoints(f.Points)
	return putFront(tx, key, f)
}

// insertPoints adds points to the front at key in one pass (see
// store.InsertPoints).
func insertPoints(tx *bolt.Tx, key []byte, name string, objs pareto.Objectives, ps []store.Point) error {
	if len(ps) == 0 {
		return nil
	}
	f := store.EmptyFront(name, objs)
	if raw := tx.Bucket(bucketFronts).Get(key); raw != nil {
		var err error
		if f, err = decodeFront(raw, false); err != nil {
			return corrupt(tx, err)
		}
		if !f.Objectives.Equal(objs) {
			return corrupt(tx, fmt.Errorf("front %s has objectives %s, want %s", name, f.Objectives, objs))
		}
	}
	f, changed := store.InsertPoints(f, ps)
	if !changed {
		return nil
	}
	return putFront(tx, key, f)
}

// putFront writes a front record and its vector cache.
func putFront(tx *bolt.Tx, key []byte, f store.Front) error {
	if err := putJSON(tx.Bucket(bucketFronts), key, f); err != nil {
		return err
	}
	return tx.Bucket(bucketFrontVecs).Put(key, store.Seal(encodeVectors(f.Vectors(), len(f.Objectives))))
}

// encodeVectors is the binary form of a front's vectors.
func encodeVectors(vecs [][]float64, d int) []byte {
	b := binary.AppendUvarint(nil, uint64(len(vecs)))
	b = binary.AppendUvarint(b, uint64(d))
	for _, v := range vecs {
		for _, x := range v {
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(x))
		}
	}
	return b
}

func decodeVectors(b []byte) ([][]float64, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, fmt.Errorf("missing or bad count")
	}
	b = b[k:]
	d, k := binary.Uvarint(b)
	if k <= 0 || d == 0 || d > 64 {
		return nil, fmt.Errorf("bad dimension")
	}
	b = b[k:]
	if n > uint64(len(b)) || uint64(len(b)) != n*d*8 {
		return nil, fmt.Errorf("%d bytes for %d vectors of %d", len(b), n, d)
	}
	out := make([][]float64, n)
	for i := range out {
		v := make([]float64, d)
		for j := range v {
			v[j] = math.Float64frombits(binary.BigEndian.Uint64(b))
			b = b[8:]
		}
		out[i] = v
	}
	return out, nil
}

// addToFronts adds a finished trial to its study's and group's fronts when
// it is eligible.
func addToFronts(tx *bolt.Tx, st store.Study, t store.Trial) error {
	p, ok := store.Eligible(st, st.SLO(), &t, store.FrontQuery{})
	if !ok {
		return nil
	}
	objs := st.Key.Objectives
	if err := insertPoint(tx, studyFrontKey(st.ID), "study/"+st.ID, objs, p); err != nil {
		return err
	}
	g := st.Key.GroupKey()
	return insertPoint(tx, groupFrontKey(g), "group/"+g, objs, p)
}

// candidates collects the eligible points of the given studies' trials
// inside one transaction (used by Check and migrations).
func candidatesTx(tx *bolt.Tx, studies []store.Study, q store.FrontQuery) ([]store.Point, error) {
	var out []store.Point
	for _, st := range studies {
		tb := tx.Bucket(bucketTrials).Bucket([]byte(st.ID))
		if tb == nil {
			continue
		}
		slo := st.SLO()
		err := tb.ForEach(func(k, v []byte) error {
			t, err := decodeAt(tx, st.ID, k, v)
			if err != nil {
				return err
			}
			if p, ok := store.Eligible(st, slo, &t, q); ok {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rebuiltFronts computes every study and group front from the trials.
func rebuiltFronts(tx *bolt.Tx) (map[string]store.Front, error) {
	studies, err := allStudies(tx)
	if err != nil {
		return nil, err
	}
	cands := map[string][]store.Point{}
	for _, st := range studies {
		c, err := candidatesTx(tx, []store.Study{st}, store.FrontQuery{})
		if err != nil {
			return nil, err
		}
		cands[st.ID] = c
	}
	return store.FrontsFrom(studies, cands), nil
}

// rebuildAllFronts replaces the fronts bucket with fronts rebuilt from trials.
func rebuildAllFronts(tx *bolt.Tx) error {
	fronts, err := rebuiltFronts(tx)
	if err != nil {
		return err
	}
	for _, name := range [][]byte{bucketFronts, bucketFrontVecs} {
		if err := tx.DeleteBucket(name); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	for name, f := range fronts {
		if len(f.Points) == 0 {
			continue // fronts are created by their first point
		}
		if err := putFront(tx, []byte(name), f); err != nil {
			return err
		}
	}
	return nil
}

// Front returns a study's front. The zero query reads the maintained front
// (one record); other queries recompute it from the study's trials.
func (s *Store) Front(ctx context.Context, studyID string, q store.FrontQuery) (store.Front, error) {
	if q.Maintained() {
		return s.readFront(ctx, studyFrontKey(studyID), func(tx *bolt.Tx) (pareto.Objectives, error) {
			st, err := getStudy(tx, studyID)
			return st.Key.Objectives, err
		})
	}
	st, err := s.Study(ctx, studyID)
	if err != nil {
		return store.Front{}, err
	}
	return s.computeFront(ctx, "study/"+studyID, st.Key.Objectives, []store.Study{st}, q)
}

// GroupFront returns the front of a model and GPU setup across all its
// studies with the same objectives; each trial must meet its own study's
// SLO (and q.SLO).
func (s *Store) GroupFront(ctx context.Context, g store.Group, q store.FrontQuery) (store.Front, error) {
	key := g.Key()
	objs := g.Objectives
	if len(objs) == 0 {
		objs = store.DefaultObjectives("")
	}
	if q.Maintained() {
		return s.readFront(ctx, groupFrontKey(key), func(*bolt.Tx) (pareto.Objectives, error) { return objs, nil })
	}
	studies, err := s.Studies(ctx)
	if err != nil {
		return store.Front{}, err
	}
	return s.computeFront(ctx, "group/"+key, objs, store.GroupStudies(studies, key), q)
}

func (s *Store) readFront(ctx context.Context, key []byte, objs func(*bolt.Tx) (pareto.Objectives, error)) (store.Front, error) {
	var f store.Front
	err := s.view(ctx, func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketFronts).Get(key)
		if raw == nil {
			o, err := objs(tx)
			f = store.Front{V: store.RecordVersion, Key: string(key), Objectives: o, Points: []store.Point{}}
			return err
		}
		var err error
		if f, err = decodeFront(raw, false); err != nil {
			return corrupt(tx, err)
		}
		return nil
	})
	return f, err
}

// computeFront scans the studies' trial summaries (chunked reads) and
// computes the front of the eligible ones.
func (s *Store) computeFront(ctx context.Context, name string, objs pareto.Objectives, studies []store.Study, q store.FrontQuery) (store.Front, error) {
	var cands []store.Point
	for _, st := range studies {
		slo := st.SLO()
		err := s.scanSummaries(ctx, st.ID, func(sm *store.Summary) error {
			if p, ok := store.EligibleSummary(st, slo, sm, q); ok {
				cands = append(cands, p)
			}
			return nil
		})
		if err != nil {
			return store.Front{}, err
		}
	}
	return store.FrontOf(name, objs, cands), nil
}

// RebuildFront computes a study's front from its trials' summaries,
// ignoring the maintained record; it always equals Front(ctx, id,
// FrontQuery{}). (Check rebuilds from the full trial records.)
func (s *Store) RebuildFront(ctx context.Context, studyID string) (store.Front, error) {
	st, err := s.Study(ctx, studyID)
	if err != nil {
		return store.Front{}, err
	}
	return s.computeFront(ctx, "study/"+studyID, st.Key.Objectives, []store.Study{st}, store.FrontQuery{})
}

// RebuildGroupFront is RebuildFront for a group front.
func (s *Store) RebuildGroupFront(ctx context.Context, g store.Group) (store.Front, error) {
	studies, err := s.Studies(ctx)
	if err != nil {
		return store.Front{}, err
	}
	objs := g.Objectives
	if len(objs) == 0 {
		objs = store.DefaultObjectives("")
	}
	key := g.Key()
	return s.computeFront(ctx, "group/"+key, objs, store.GroupStudies(studies, key), store.FrontQuery{})
}

// decodeSealedVectors verifies a stored vector cache and decodes it.
func decodeSealedVectors(b []byte) ([][]float64, error) {
	payload, err := store.Unseal(b, false)
	if err != nil {
		return nil, err
	}
	return decodeVectors(payload)
}
