package boltstore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/vllm-tuner/tuner/store"
)

// seqKey is the 8-byte big-endian key of a sequence number.
func seqKey(seq uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return b[:]
}

// runningKey indexes a running trial.
func runningKey(studyID string, seq uint64) []byte {
	return append([]byte(studyID), seqKey(seq)...)
}

// trialV0 is the schema-0 trial record: no "v", "status" instead of
// "state" and "config_hash" instead of "config_id".
type trialV0 struct {
	Status     string `json:"status"`
	ConfigHash string `json:"config_hash"`
}

// DecodeTrial decodes a stored trial record of any supported version
// (sealed or, from older files, not) and validates it.
func DecodeTrial(b []byte) (store.Trial, error) { return decodeTrial(b, true) }

// decodeTrial is DecodeTrial; without legacy the record must be sealed.
func decodeTrial(b []byte, legacy bool) (store.Trial, error) {
	var t store.Trial
	payload, err := store.Unseal(b, legacy)
	if err == nil {
		err = json.Unmarshal(payload, &t)
	}
	if err != nil {
		return store.Trial{}, fmt.Errorf("decode trial: %w", err)
	}
	b = payload
	switch {
	case t.V > store.RecordVersion:
		return store.Trial{}, fmt.Errorf("decode trial %s: record version %d: %w", t.ID, t.V, store.ErrTooNew)
	case t.V < 0:
		return store.Trial{}, fmt.Errorf("decode trial: record version %d", t.V)
	case t.V == 0:
		var old trialV0
		if err := json.Unmarshal(b, &old); err != nil {
			return store.Trial{}, fmt.Errorf("decode trial v0: %w", err)
		}
		t.State = store.State(old.Status)
		if t.State == store.StateRunning { // schema 0 had no sessions: its writer is gone
			t.State = store.StateInterrupted
		}
		if t.ConfigID == "" {
			t.ConfigID = old.ConfigHash
		}
		t.V = store.RecordVersion
	}
	if err := t.Validate(); err != nil {
		return store.Trial{}, fmt.Errorf("decode trial %s: %w", t.ID, err)
	}
	return t, nil
}

// DecodeStudy decodes a stored study record (sealed or not).
func DecodeStudy(b []byte) (store.Study, error) { return decodeStudy(b, true) }

func decodeStudy(b []byte, legacy bool) (store.Study, error) {
	s, err := store.DecodeRecord[store.Study](b, legacy)
	if err != nil {
		return store.Study{}, err
	}
	if s.V <= 0 && len(s.Key.Objectives) == 0 {
		s.Key.Objectives = store.DefaultObjectives("") // schema 0 had no objectives
	}
	s.V = store.RecordVersion
	if !store.ValidStudyID(s.ID) {
		return store.Study{}, fmt.Errorf("decode study: bad id %q", s.ID)
	}
	return s, nil
}

// DecodeFront decodes a stored front record (sealed or not).
func DecodeFront(b []byte) (store.Front, error) { return decodeFront(b, true) }

func decodeFront(b []byte, legacy bool) (store.Front, error) {
	var f store.Front
	dec := store.DecodeStrict
	if legacy {
		dec = store.DecodeAny
	}
	if err := dec(b, &f); err != nil {
		return store.Front{}, fmt.Errorf("decode front: %w", err)
	}
	if f.V < 1 || f.V > store.RecordVersion {
		return store.Front{}, fmt.Errorf("decode front %s: record version %d", f.Key, f.V)
	}
	for _, p := range f.Points {
		if len(p.Values) != len(f.Objectives) {
			return store.Front{}, fmt.Errorf("decode front %s: point %s has %d values for %d objectives", f.Key, p.TrialID, len(p.Values), len(f.Objectives))
		}
	}
	return f, nil
}

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
