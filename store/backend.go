package store

import (
	"crypto/rand"
	"encoding/hex"
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

// RandomID is 16 random hex digits: a writer session's ID (and a file
// name's unique suffix).
func RandomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
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

// UnmarshalTrial, UnmarshalStudy, UnmarshalFront, UnmarshalModelMeta,
// UnmarshalJob and UnmarshalSchedule decode a record's JSON (plain, or
// sealed as this store keeps it) and refuse records newer than this
// program.
func UnmarshalTrial(b []byte) (Trial, error) { return DecodeRecord[Trial](b, true) }

// UnmarshalStudy: see UnmarshalTrial.
func UnmarshalStudy(b []byte) (Study, error) { return DecodeRecord[Study](b, true) }

// UnmarshalFront: see UnmarshalTrial.
func UnmarshalFront(b []byte) (Front, error) { return DecodeRecord[Front](b, true) }

// UnmarshalModelMeta: see UnmarshalTrial.
func UnmarshalModelMeta(b []byte) (ModelMeta, error) { return DecodeRecord[ModelMeta](b, true) }

// UnmarshalJob: see UnmarshalTrial.
func UnmarshalJob(b []byte) (Job, error) { return DecodeRecord[Job](b, true) }

// UnmarshalSchedule: see UnmarshalTrial.
func UnmarshalSchedule(b []byte) (Schedule, error) { return DecodeRecord[Schedule](b, true) }

// DecodeRecord decodes a stored record, sealed (with legacy, also plain:
// DecodeAny, else DecodeStrict), and refuses one newer than this program.
// The error names the record and, once decoded, its key.
func DecodeRecord[T any, P interface {
	*T
	record() (what string, v int, key string)
}](b []byte, legacy bool) (T, error) {
	var r T
	decode := DecodeStrict
	if legacy {
		decode = DecodeAny
	}
	what, _, _ := P(&r).record()
	if err := decode(b, &r); err != nil {
		return *new(T), fmt.Errorf("decode %s: %w", what, err)
	}
	if _, v, key := P(&r).record(); v > RecordVersion {
		return *new(T), fmt.Errorf("decode %s %s: record version %d: %w", what, key, v, ErrTooNew)
	}
	return r, nil
}

func (t *Trial) record() (string, int, string)     { return "trial", t.V, t.ID }
func (s *Study) record() (string, int, string)     { return "study", s.V, s.ID }
func (f *Front) record() (string, int, string)     { return "front", f.V, f.Key }
func (m *ModelMeta) record() (string, int, string) { return "model meta", m.V, m.Name }
func (j *Job) record() (string, int, string)       { return "job", j.V, j.ID }
func (s *Schedule) record() (string, int, string)  { return "schedule", s.V, s.ID }
