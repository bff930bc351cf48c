package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// RecordVersion is the encoding version written into every record's "v".
// Version 0 records (schema 0 files) have no "v"; the decoders read them.
// Version 2 records are sealed (see seal): the JSON inside a checksummed
// envelope.
const RecordVersion = 2

// State is where a trial is in its life.
type State string

const (
	StateRunning     State = "running"     // written before the engine starts
	StateOK          State = "ok"          // measured and stable
	StateUnstable    State = "unstable"    // measured, steady state not reached
	StateFailed      State = "failed"      // no usable measurement (see Result.Failure)
	StateInterrupted State = "interrupted" // the tuner stopped or died during the trial
)

// Valid reports whether s is one of the defined states.
func (s State) Valid() bool {
	switch s {
	case StateRunning, StateOK, StateUnstable, StateFailed, StateInterrupted:
		return true
	}
	return false
}

// Finished reports whether the trial has ended.
func (s State) Finished() bool { return s.Valid() && s != StateRunning }

// Measured reports whether the trial ended with a verdict a search learns
// from (ok, unstable or failed): finished and not interrupted.
func (s State) Measured() bool { return s == StateOK || s == StateUnstable || s == StateFailed }

// StateOf maps a trial result to the state it ends in: the one rule of
// every door. No result means the trial never got to a verdict
// (interrupted); a failed record always carries the result saying why.
func StateOf(r *trial.Result) State {
	switch {
	case r == nil:
		return StateInterrupted
	case r.Failure == trial.FailInterrupted:
		return StateInterrupted
	case r.Status == trial.StatusOK:
		return StateOK
	case r.Status == trial.StatusUnstable:
		return StateUnstable
	}
	return StateFailed
}

// DefaultObjectives are tuner's usual three: output throughput up, the given
// latency metric (e.g. "tpot_p99"; "" means "tpot_p99") down, peak VRAM down.
func DefaultObjectives(latency string) pareto.Objectives {
	if latency == "" {
		latency = "tpot_p99"
	}
	return pareto.Objectives{
		{Name: "output_throughput", Direction: pareto.Maximize},
		{Name: latency, Direction: pareto.Minimize},
		{Name: "peak_vram_gib", Direction: pareto.Minimize},
	}
}

// StudyKey is what makes two searches the same study.
type StudyKey struct {
	Model         string            `json:"model"`
	GPU           string            `json:"gpu"`
	GPUCount      int               `json:"gpu_count"`
	Engine        string            `json:"engine"` // "vllm", "sim", "sim-virtual"
	EngineVersion string            `json:"engine_version"`
	Workload      string            `json:"workload"`
	Objectives    pareto.Objectives `json:"objectives"`
	SLO           string            `json:"slo"` // canonical trial.SLO.String()
	SpaceHash     string            `json:"space_hash"`

	// ServedModel is the name the engine serves (the HF id or directory
	// passed to --model) when it differs from the catalog's Model: a base
	// model and its -Instruct variant share a profile, not a study. Empty
	// keeps the IDs of studies keyed before it.
	ServedModel string `json:"served_model,omitempty"`
}

// normalize fills defaults and canonicalises the SLO so that equivalent
// spellings ("800ms", "0.8s") give the same study.
func (k StudyKey) normalize() (StudyKey, trial.SLO, error) {
	if k.Model == "" || k.GPU == "" {
		return k, nil, fmt.Errorf("study key: model and gpu are required")
	}
	if k.GPUCount <= 0 {
		k.GPUCount = 1
	}
	if len(k.Objectives) == 0 {
		k.Objectives = DefaultObjectives("")
	}
	if err := k.Objectives.Validate(); err != nil {
		return k, nil, fmt.Errorf("study key: %w", err)
	}
	slo, err := trial.ParseSLO(k.SLO)
	if err != nil {
		return k, nil, fmt.Errorf("study key: %w", err)
	}
	k.SLO = slo.String()
	return k, slo, nil
}

// ID is the stable study ID: 12 hex digits of the SHA-256 of the key's JSON.
func (k StudyKey) ID() string {
	b, _ := json.Marshal(k)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6])
}

// GroupKey names the cross-study front this study feeds: same model, GPU
// type and count, and objectives.
func (k StudyKey) GroupKey() string {
	return fmt.Sprintf("%s|%s|%d|%s", k.Model, k.GPU, k.GPUCount, k.Objectives)
}

// Study is a stored study.
type Study struct {
	V       int       `json:"v"`
	ID      string    `json:"id"`
	Key     StudyKey  `json:"key"`
	Created time.Time `json:"created"`
}

// SLO returns the study's parsed SLO (the key holds it canonical).
func (s Study) SLO() trial.SLO {
	slo, _ := trial.ParseSLO(s.Key.SLO)
	return slo
}

// Trial is one stored trial. Trials of a study are numbered by Seq from 1 in
// the order they were begun; ID is "<study ID>-<seq>".
type Trial struct {
	V        int           `json:"v"`
	ID       string        `json:"id"`
	StudyID  string        `json:"study_id"`
	Seq      uint64        `json:"seq"`
	State    State         `json:"state"`
	ConfigID string        `json:"config_id"`
	Config   spaces.Config `json:"config"`
	Repeat   int           `json:"repeat"` // 0 for the first measurement of a config, 1.. for re-measurements
	Result   *trial.Result `json:"result,omitempty"`
	Started  time.Time     `json:"started"`
	Ended    time.Time     `json:"ended,omitzero"`
	Notes    string        `json:"notes,omitempty"`
	Session  string        `json:"session,omitempty"` // the writer session that began it
	Worker   string        `json:"worker,omitempty"`  // the worker that leased it (several on one study)
}

// ConfigKey is the ID of the config the trial measured: ConfigID, or
// derived from Config for records written without it.
func (t *Trial) ConfigKey() string {
	if t.ConfigID != "" {
		return t.ConfigID
	}
	return t.Config.ID()
}

// Verdict is the short form shown in progress lines and tables: ok,
// unstable, failed:<class> or interrupted.
func (t Trial) Verdict() string {
	if t.State == StateFailed && t.Result != nil {
		return t.Result.String()
	}
	return string(t.State)
}

// TrialID builds a trial ID from its parts.
func TrialID(studyID string, seq uint64) string { return studyID + "-" + strconv.FormatUint(seq, 10) }

// ParseTrialID splits a trial ID.
func ParseTrialID(id string) (studyID string, seq uint64, err error) {
	sid, n, ok := strings.Cut(id, "-")
	if ok {
		seq, err = strconv.ParseUint(n, 10, 64)
	}
	if !ok || err != nil || seq == 0 || !ValidStudyID(sid) {
		return "", 0, fmt.Errorf("trial id %q: want STUDY-SEQ (e.g. 3f2a9c1b0d4e-17): %w", id, ErrNotFound)
	}
	return sid, seq, nil
}

func ValidStudyID(id string) bool {
	if len(id) != 12 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// Point is one member of a front: a trial reference and its objective vector
// (in the objectives' order and units).
type Point struct {
	TrialID  string        `json:"trial_id"`
	StudyID  string        `json:"study_id"`
	Seq      uint64        `json:"seq"`
	ConfigID string        `json:"config_id"`
	Config   spaces.Config `json:"config"`
	Values   []float64     `json:"values"`
}

// Front is a set of mutually non-dominated points, sorted by (study, seq).
type Front struct {
	V          int               `json:"v"`
	Key        string            `json:"key"`
	Objectives pareto.Objectives `json:"objectives"`
	Points     []Point           `json:"points"`
}

// Vectors returns the objective vectors of the points.
func (f *Front) Vectors() [][]float64 {
	out := make([][]float64, len(f.Points))
	for i, p := range f.Points {
		out[i] = p.Values
	}
	return out
}

// ModelMeta describes a stored surrogate model file.
type ModelMeta struct {
	V       int                `json:"v"`
	Name    string             `json:"name"`
	Kind    string             `json:"kind,omitempty"`   // e.g. "lightgbm-text"
	Schema  json.RawMessage    `json:"schema,omitempty"` // the feature schema, as its owner defines it
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Created time.Time          `json:"created"`
	Size    int                `json:"size"`
	SHA256  string             `json:"sha256"`
}

// NewModelMeta is the metadata a backend stores with model file data under
// name: meta with V, Name, Size and SHA256 set and a zero Created set to
// now. It refuses an empty name and a schema that is not JSON.
func NewModelMeta(name string, data []byte, meta ModelMeta, now time.Time) (ModelMeta, error) {
	if name == "" {
		return meta, errors.New("put model: empty name")
	}
	if len(meta.Schema) > 0 && !json.Valid(meta.Schema) {
		return meta, fmt.Errorf("put model %s: schema is not valid JSON", name)
	}
	meta.V, meta.Name, meta.Size, meta.SHA256 = RecordVersion, name, len(data), modelSum(data)
	if meta.Created.IsZero() {
		meta.Created = now.UTC()
	}
	return meta, nil
}

// Matches reports whether data is the model file m describes (its checksum).
func (m ModelMeta) Matches(data []byte) bool { return modelSum(data) == m.SHA256 }

func modelSum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// encode is the stored form of a JSON record: sealed (see seal). Every
// record type goes through encode (or putJSON) and decodeStrict, so each
// one is checksummed and verified without code of its own.
func Encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Seal(b), nil
}

// decodeStrict verifies a sealed record and unmarshals its one JSON value
// into v (json.Unmarshal already rejects trailing data). A record without
// the envelope is refused: since schema 2 every record has one.
func DecodeStrict(b []byte, v any) error {
	payload, err := Unseal(b, false)
	if err != nil {
		return err
	}
	return json.Unmarshal(payload, v)
}

// decodeAny is decodeStrict that also reads the unsealed records of schema
// 0 and 1 files (migrations and the exported decoders).
func DecodeAny(b []byte, v any) error {
	payload, err := Unseal(b, true)
	if err != nil {
		return err
	}
	return json.Unmarshal(payload, v)
}

// The record envelope: sealMagic, the CRC-32C (Castagnoli) of the payload
// as 4 big-endian bytes, then the payload. The magic byte is neither '{'
// (a schema-1 JSON record) nor 1 (a schema-1 summary), so no old record
// reads as sealed; a flipped byte anywhere in a record fails the checksum.
const (
	SealMagic  = 0xC5
	SealHeader = 5
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrChecksum reports a record whose bytes do not match its checksum.
var ErrChecksum = errors.New("record checksum mismatch")

// seal wraps payload in the checksummed envelope.
func Seal(payload []byte) []byte {
	b := make([]byte, SealHeader, SealHeader+len(payload))
	b[0] = SealMagic
	binary.BigEndian.PutUint32(b[1:], crc32.Checksum(payload, crcTable))
	return append(b, payload...)
}

// unseal verifies the envelope and returns the payload (a subslice of b).
// With legacy set, a record without the envelope is returned as it is.
func Unseal(b []byte, legacy bool) ([]byte, error) {
	if len(b) == 0 || b[0] != SealMagic {
		if legacy {
			return b, nil
		}
		return nil, errors.New("record has no checksum envelope")
	}
	if len(b) < SealHeader {
		return nil, fmt.Errorf("record envelope: %d bytes", len(b))
	}
	if want, got := binary.BigEndian.Uint32(b[1:]), crc32.Checksum(b[SealHeader:], crcTable); want != got {
		return nil, fmt.Errorf("%w: stored %08x, computed %08x over %d bytes", ErrChecksum, want, got, len(b)-SealHeader)
	}
	return b[SealHeader:], nil
}

func (t *Trial) Validate() error {
	switch {
	case !ValidStudyID(t.StudyID):
		return fmt.Errorf("bad study id %q", t.StudyID)
	case t.Seq == 0:
		return fmt.Errorf("sequence 0")
	case t.ID != TrialID(t.StudyID, t.Seq):
		return fmt.Errorf("id %q does not match study %s and sequence %d", t.ID, t.StudyID, t.Seq)
	case !t.State.Valid():
		return fmt.Errorf("unknown state %q", t.State)
	case t.Repeat < 0:
		return fmt.Errorf("negative repeat %d", t.Repeat)
	case t.State != StateRunning && t.State != StateInterrupted && t.Result == nil:
		return fmt.Errorf("state %s without a result", t.State)
	}
	return nil
}

// Hypervolume is the front's hypervolume against ref (in the objectives'
// units, worse than every interesting point; see pareto.Hypervolume).
func (f *Front) Hypervolume(ref []float64) (float64, error) {
	return pareto.Hypervolume(f.Vectors(), f.Objectives.Directions(), ref)
}

// Knee returns the front's compromise point (see pareto.Knee); false when
// the front is empty.
func (f *Front) Knee() (Point, bool) {
	i := pareto.Knee(f.Vectors(), f.Objectives.Directions(), nil)
	if i < 0 {
		return Point{}, false
	}
	return f.Points[i], true
}
