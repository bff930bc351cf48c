package store

import (
	"encoding/json"
	"fmt"
	"github.com/vllm-tuner/tuner/pareto"
	"slices"
)

// The functions in this file let another backend (store/pgstore) keep the
// same records and front rules as this one without a second copy of them.

// Normalize returns the key with defaults filled and the SLO canonical, as
// EnsureStudy stores it (its ID is the study's ID).
func (k StudyKey) Normalize() (StudyKey, error) {
	k, _, err := k.normalize()
	return k, err
}

// FrontPoint returns the point a trial contributes to its study's fronts
// under q, and whether it is eligible (state, finite objectives, SLO).
func FrontPoint(st Study, t *Trial, q FrontQuery) (Point, bool) {
	return Eligible(st, st.SLO(), t, q)
}

// SummaryFrontPoint is FrontPoint for a summary.
func SummaryFrontPoint(st Study, sm *Summary, q FrontQuery) (Point, bool) {
	return EligibleSummary(st, st.SLO(), sm, q)
}

// EmptyFront is the front record of a key without points.
func EmptyFront(name string, objs pareto.Objectives) Front {
	return Front{V: RecordVersion, Key: name, Objectives: objs, Points: []Point{}}
}

// InsertPoint adds p to f when no member dominates it, dropping the members
// it dominates; it reports whether f changed. f is not modified.
func InsertPoint(f Front, p Point) (Front, bool, error) {
	add, drop := pareto.Insert(f.Vectors(), p.Values, f.Objectives.Directions())
	if !add {
		return f, false, nil
	}
	out := f
	out.V = RecordVersion
	out.Points = slices.Clone(f.Points)
	for k := len(drop) - 1; k >= 0; k-- {
		out.Points = slices.Delete(out.Points, drop[k], drop[k]+1)
	}
	out.Points = append(out.Points, p)
	SortPoints(out.Points)
	return out, true, nil
}

// InsertPoints adds the points of ps that no member or other point
// dominates to f in one pass (an import's trials), dropping the members
// they dominate; it reports whether f changed. f is not modified.
func InsertPoints(f Front, ps []Point) (Front, bool) {
	if len(ps) == 0 {
		return f, false
	}
	out := FrontOf(f.Key, f.Objectives, append(slices.Clone(f.Points), ps...))
	return out, !SameFront(f, out)
}

// StudyFrontName and GroupFrontName are the names (Front.Key) of a study's
// and a group's maintained fronts.
func StudyFrontName(studyID string) string { return "study/" + studyID }

// GroupFrontName: see StudyFrontName.
func GroupFrontName(groupKey string) string { return "group/" + groupKey }

// MarshalRecord is a record's JSON as this store keeps it inside its
// envelope (the encoding every backend stores).
func MarshalRecord(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	return b, nil
}

// UnmarshalTrial, UnmarshalStudy, UnmarshalFront and UnmarshalModelMeta
// decode a record's JSON (plain, or sealed as this store keeps it) and
// refuse records newer than this program.
func UnmarshalTrial(b []byte) (Trial, error) {
	var t Trial
	if err := DecodeAny(b, &t); err != nil {
		return Trial{}, fmt.Errorf("decode trial: %w", err)
	}
	if t.V > RecordVersion {
		return Trial{}, fmt.Errorf("decode trial %s: record version %d: %w", t.ID, t.V, ErrTooNew)
	}
	return t, nil
}

// UnmarshalStudy: see UnmarshalTrial.
func UnmarshalStudy(b []byte) (Study, error) {
	var s Study
	if err := DecodeAny(b, &s); err != nil {
		return Study{}, fmt.Errorf("decode study: %w", err)
	}
	if s.V > RecordVersion {
		return Study{}, fmt.Errorf("decode study %s: record version %d: %w", s.ID, s.V, ErrTooNew)
	}
	return s, nil
}

// UnmarshalFront: see UnmarshalTrial.
func UnmarshalFront(b []byte) (Front, error) {
	var f Front
	if err := DecodeAny(b, &f); err != nil {
		return Front{}, fmt.Errorf("decode front: %w", err)
	}
	if f.V > RecordVersion {
		return Front{}, fmt.Errorf("decode front %s: record version %d: %w", f.Key, f.V, ErrTooNew)
	}
	return f, nil
}

// UnmarshalModelMeta: see UnmarshalTrial.
func UnmarshalModelMeta(b []byte) (ModelMeta, error) {
	var m ModelMeta
	if err := DecodeAny(b, &m); err != nil {
		return ModelMeta{}, fmt.Errorf("decode model meta: %w", err)
	}
	if m.V > RecordVersion {
		return ModelMeta{}, fmt.Errorf("decode model meta %s: record version %d: %w", m.Name, m.V, ErrTooNew)
	}
	return m, nil
}

// UnmarshalJob: see UnmarshalTrial.
func UnmarshalJob(b []byte) (Job, error) {
	var j Job
	if err := DecodeAny(b, &j); err != nil {
		return Job{}, fmt.Errorf("decode job: %w", err)
	}
	if j.V > RecordVersion {
		return Job{}, fmt.Errorf("decode job %s: record version %d: %w", j.ID, j.V, ErrTooNew)
	}
	return j, nil
}
