package store

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/trial"
)

// Group names a cross-study front: one model on one GPU setup, one list of
// objectives.
type Group struct {
	Model      string            `json:"model"`
	GPU        string            `json:"gpu"`
	GPUCount   int               `json:"gpu_count"`
	Objectives pareto.Objectives `json:"objectives"`
}

// Key is the group's front key (see StudyKey.GroupKey).
func (g Group) Key() string {
	if g.GPUCount <= 0 {
		g.GPUCount = 1
	}
	if len(g.Objectives) == 0 {
		g.Objectives = DefaultObjectives("")
	}
	return StudyKey{Model: g.Model, GPU: g.GPU, GPUCount: g.GPUCount, Objectives: g.Objectives}.GroupKey()
}

// Group returns the cross-study group a study feeds.
func (k StudyKey) Group() Group {
	return Group{Model: k.Model, GPU: k.GPU, GPUCount: k.GPUCount, Objectives: k.Objectives}
}

func studyFrontKey(id string) []byte  { return []byte("study/" + id) }
func groupFrontKey(key string) []byte { return []byte("group/" + key) }
func sortPoints(ps []Point) {
	slices.SortFunc(ps, func(a, b Point) int {
		if c := cmp.Compare(a.StudyID, b.StudyID); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
}

// FrontQuery filters a front query. The zero query returns the maintained
// front (state ok, the study's own SLO).
type FrontQuery struct {
	// SLO, when set, must hold too (on top of each study's own SLO); the
	// front is then recomputed from the trials, since a stricter SLO can
	// bring trials that were dominated back into the front.
	SLO trial.SLO
	// IncludeUnstable admits trials in state unstable (recomputed too).
	IncludeUnstable bool
}

func (q FrontQuery) maintained() bool { return len(q.SLO) == 0 && !q.IncludeUnstable }

// eligible returns the front point of t under st's objectives and SLO and
// the query's extra conditions.
func eligible(st Study, slo trial.SLO, t *Trial, q FrontQuery) (Point, bool) {
	if t.Result == nil {
		return Point{}, false
	}
	return eligibleOf(st, slo, q, t.State, t.Result.Objective, t.Result.Metrics,
		Point{TrialID: t.ID, StudyID: t.StudyID, Seq: t.Seq, ConfigID: t.ConfigID, Config: t.Config})
}

// eligibleSummary is eligible for a trial summary; the two agree on every
// trial (Check verifies summaries against trials).
func eligibleSummary(st Study, slo trial.SLO, sm *Summary, q FrontQuery) (Point, bool) {
	return eligibleOf(st, slo, q, sm.State, sm.Objective, sm.Metrics,
		Point{TrialID: sm.ID(), StudyID: sm.StudyID, Seq: sm.Seq, ConfigID: sm.ConfigID, Config: sm.Config})
}

func eligibleOf(st Study, slo trial.SLO, q FrontQuery, state State, objective func(string) (float64, bool), metrics func() *trial.Metrics, p Point) (Point, bool) {
	switch {
	case state == StateOK:
	case state == StateUnstable && q.IncludeUnstable:
	default:
		return Point{}, false
	}
	vals := make([]float64, len(st.Key.Objectives))
	for i, o := range st.Key.Objectives {
		x, ok := objective(o.Name)
		if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
			return Point{}, false
		}
		vals[i] = x
	}
	if len(slo) > 0 || len(q.SLO) > 0 {
		m := metrics()
		if m == nil {
			return Point{}, false
		}
		if ok, _ := slo.Check(m); !ok {
			return Point{}, false
		}
		if ok, _ := q.SLO.Check(m); !ok {
			return Point{}, false
		}
	}
	p.Values = vals
	return p, true
}

// frontOf computes the front of candidate points with the pareto package.
func frontOf(key string, objs pareto.Objectives, cands []Point) Front {
	vecs := make([][]float64, len(cands))
	for i, p := range cands {
		vecs[i] = p.Values
	}
	f := Front{V: RecordVersion, Key: key, Objectives: objs, Points: []Point{}}
	for _, i := range pareto.Front(vecs, objs.Directions()) {
		f.Points = append(f.Points, cands[i])
	}
	sortPoints(f.Points)
	return f
}

// insertPoint updates front record key with p (incremental maintenance).
func insertPoint(tx *bolt.Tx, key []byte, name string, objs pareto.Objectives, p Point) error {
	b := tx.Bucket(bucketFronts)
	f := Front{V: RecordVersion, Key: name, Objectives: objs, Points: []Point{}}
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
	sortPoints(f.Points)
	return putFront(tx, key, f)
}

// putFront writes a front record and its vector cache.
func putFront(tx *bolt.Tx, key []byte, f Front) error {
	if err := putJSON(tx.Bucket(bucketFronts), key, f); err != nil {
		return err
	}
	return tx.Bucket(bucketFrontVecs).Put(key, seal(encodeVectors(f.Vectors(), len(f.Objectives))))
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
func addToFronts(tx *bolt.Tx, st Study, t Trial) error {
	p, ok := eligible(st, st.SLO(), &t, FrontQuery{})
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
func candidatesTx(tx *bolt.Tx, studies []Study, q FrontQuery) ([]Point, error) {
	var out []Point
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
			if p, ok := eligible(st, slo, &t, q); ok {
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

// groupStudies returns the studies feeding group key g.
func groupStudies(studies []Study, g string) []Study {
	var out []Study
	for _, st := range studies {
		if st.Key.GroupKey() == g {
			out = append(out, st)
		}
	}
	return out
}

// rebuiltFronts computes every study and group front from the trials.
func rebuiltFronts(tx *bolt.Tx) (map[string]Front, error) {
	studies, err := allStudies(tx)
	if err != nil {
		return nil, err
	}
	cands := map[string][]Point{}
	for _, st := range studies {
		c, err := candidatesTx(tx, []Study{st}, FrontQuery{})
		if err != nil {
			return nil, err
		}
		cands[st.ID] = c
	}
	return frontsFrom(studies, cands), nil
}

// frontsFrom builds every study and group front from each study's eligible
// points.
func frontsFrom(studies []Study, candsByStudy map[string][]Point) map[string]Front {
	out := map[string]Front{}
	byGroup := map[string][]Point{}
	groupObjs := map[string]pareto.Objectives{}
	for _, st := range studies {
		cands := candsByStudy[st.ID]
		name := "study/" + st.ID
		out[name] = frontOf(name, st.Key.Objectives, cands)
		g := st.Key.GroupKey()
		byGroup[g] = append(byGroup[g], out[name].Points...) // a group front is the front of its studies' fronts
		groupObjs[g] = st.Key.Objectives
	}
	for g, ps := range byGroup {
		name := "group/" + g
		out[name] = frontOf(name, groupObjs[g], ps)
	}
	return out
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
func (s *Store) Front(ctx context.Context, studyID string, q FrontQuery) (Front, error) {
	if q.maintained() {
		return s.readFront(ctx, studyFrontKey(studyID), func(tx *bolt.Tx) (pareto.Objectives, error) {
			st, err := getStudy(tx, studyID)
			return st.Key.Objectives, err
		})
	}
	st, err := s.Study(ctx, studyID)
	if err != nil {
		return Front{}, err
	}
	return s.computeFront(ctx, "study/"+studyID, st.Key.Objectives, []Study{st}, q)
}

// GroupFront returns the front of a model and GPU setup across all its
// studies with the same objectives; each trial must meet its own study's
// SLO (and q.SLO).
func (s *Store) GroupFront(ctx context.Context, g Group, q FrontQuery) (Front, error) {
	key := g.Key()
	objs := g.Objectives
	if len(objs) == 0 {
		objs = DefaultObjectives("")
	}
	if q.maintained() {
		return s.readFront(ctx, groupFrontKey(key), func(*bolt.Tx) (pareto.Objectives, error) { return objs, nil })
	}
	studies, err := s.Studies(ctx)
	if err != nil {
		return Front{}, err
	}
	return s.computeFront(ctx, "group/"+key, objs, groupStudies(studies, key), q)
}

func (s *Store) readFront(ctx context.Context, key []byte, objs func(*bolt.Tx) (pareto.Objectives, error)) (Front, error) {
	var f Front
	err := s.view(ctx, func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketFronts).Get(key)
		if raw == nil {
			o, err := objs(tx)
			f = Front{V: RecordVersion, Key: string(key), Objectives: o, Points: []Point{}}
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
func (s *Store) computeFront(ctx context.Context, name string, objs pareto.Objectives, studies []Study, q FrontQuery) (Front, error) {
	var cands []Point
	for _, st := range studies {
		slo := st.SLO()
		err := s.scanSummaries(ctx, st.ID, func(sm *Summary) error {
			if p, ok := eligibleSummary(st, slo, sm, q); ok {
				cands = append(cands, p)
			}
			return nil
		})
		if err != nil {
			return Front{}, err
		}
	}
	return frontOf(name, objs, cands), nil
}

// RebuildFront computes a study's front from its trials' summaries,
// ignoring the maintained record; it always equals Front(ctx, id,
// FrontQuery{}). (Check rebuilds from the full trial records.)
func (s *Store) RebuildFront(ctx context.Context, studyID string) (Front, error) {
	st, err := s.Study(ctx, studyID)
	if err != nil {
		return Front{}, err
	}
	return s.computeFront(ctx, "study/"+studyID, st.Key.Objectives, []Study{st}, FrontQuery{})
}

// RebuildGroupFront is RebuildFront for a group front.
func (s *Store) RebuildGroupFront(ctx context.Context, g Group) (Front, error) {
	studies, err := s.Studies(ctx)
	if err != nil {
		return Front{}, err
	}
	objs := g.Objectives
	if len(objs) == 0 {
		objs = DefaultObjectives("")
	}
	key := g.Key()
	return s.computeFront(ctx, "group/"+key, objs, groupStudies(studies, key), FrontQuery{})
}

// decodeSealedVectors verifies a stored vector cache and decodes it.
func decodeSealedVectors(b []byte) ([][]float64, error) {
	payload, err := unseal(b, false)
	if err != nil {
		return nil, err
	}
	return decodeVectors(payload)
}
