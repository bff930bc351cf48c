package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// Schedule is a recurring job of the service: a cron expression and the
// job body queued at each firing (the store reads neither). The fire
// fields say when it fired last, what it queued and when it fires next.
type Schedule struct {
	V    int    `json:"v"`
	ID   string `json:"id"`
	Seq  uint64 `json:"seq"`
	Name string `json:"name"` // unique in the database
	Cron string `json:"cron"`
	// Job is the body of the job each firing queues (POST /api/v1/jobs).
	Job json.RawMessage `json:"job"`
	// Gate holds the regression gate's options for the schedule's
	// benchmark runs (nil: the defaults).
	Gate   json.RawMessage `json:"gate,omitempty"`
	Paused bool            `json:"paused"`
	// CatchUp runs a firing missed while the service was down once at the
	// next start; false records it as missed instead.
	CatchUp bool      `json:"catch_up"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// NextFire is the slot the schedule fires for next (zero while paused).
	NextFire time.Time `json:"next_fire,omitzero"`
	LastFire time.Time `json:"last_fire,omitzero"`
	// LastJob is the job the latest firing queued (skipped firings queue
	// none); Fires counts the firings recorded.
	LastJob string `json:"last_job,omitempty"`
	Fires   uint64 `json:"fires"`
}

// FireOutcome is what one firing of a schedule did.
type FireOutcome string

const (
	FireQueued  FireOutcome = "queued"  // a job was queued
	FireSkipped FireOutcome = "skipped" // the previous job was still queued or running
	FireMissed  FireOutcome = "missed"  // due while the service was down, and catch-up is off
	FireFailed  FireOutcome = "failed"  // the job body no longer resolves (see Reason)
)

// ScheduleFire is one entry of a schedule's history: the slot it fired
// for, when, and what it did.
type ScheduleFire struct {
	Schedule string      `json:"schedule"`
	Seq      uint64      `json:"seq"`
	Slot     time.Time   `json:"slot"` // the cron time it fired for
	Time     time.Time   `json:"time"` // when it fired
	Outcome  FireOutcome `json:"outcome"`
	// CatchUp marks the one run of slots that passed while the service was
	// down.
	CatchUp bool   `json:"catch_up,omitempty"`
	Job     string `json:"job,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// ScheduleID is the ID of the schedule with sequence number seq.
func ScheduleID(seq uint64) string { return fmt.Sprintf("sched-%d", seq) }

// ParseScheduleID returns the sequence number of a schedule ID; a
// malformed ID is ErrNotFound.
func ParseScheduleID(id string) (uint64, error) {
	var seq uint64
	if _, err := fmt.Sscanf(id, "sched-%d", &seq); err != nil || ScheduleID(seq) != id || seq == 0 {
		return 0, fmt.Errorf("schedule %q: %w", id, ErrNotFound)
	}
	return seq, nil
}

// EditSchedule is what UpdateSchedule stores: the definition and the next
// fire time of edit over the fire record of stored (a concurrent firing's
// record is never overwritten by an edit).
func EditSchedule(stored, edit Schedule, now time.Time) Schedule {
	out := stored
	out.Name, out.Cron, out.Job, out.Gate = edit.Name, edit.Cron, edit.Job, edit.Gate
	out.Paused, out.CatchUp, out.NextFire = edit.Paused, edit.CatchUp, edit.NextFire
	out.Updated = now
	return out
}

// FireSchedule checks a firing against the stored schedule and returns
// the schedule and the fire record to store: the fire must be for the
// stored next slot (else ErrClaimed: another service fired it), numbered
// next in the schedule's history; job (nil: none queued) is the ID of the
// job queued with it.
func FireSchedule(stored Schedule, f ScheduleFire, next time.Time, job string) (Schedule, ScheduleFire, error) {
	if stored.Paused || !stored.NextFire.Equal(f.Slot) {
		return stored, f, fmt.Errorf("schedule %s slot %s (stored next %s, paused %t): %w", stored.ID,
			f.Slot.UTC().Format(time.RFC3339), stored.NextFire.UTC().Format(time.RFC3339), stored.Paused, ErrClaimed)
	}
	stored.Fires++
	f.Schedule, f.Seq, f.Job = stored.ID, stored.Fires, job
	stored.LastFire, stored.NextFire = f.Time, next
	if job != "" {
		stored.LastJob = job
	}
	return stored, f, nil
}

// CheckImportSchedule checks that a copied schedule's ID and sequence
// number agree and that its firings are its own, numbered from 1 in order
// (how both backends key them), and returns the schedule's number.
func CheckImportSchedule(s Schedule, fires []ScheduleFire) (uint64, error) {
	seq, err := ParseScheduleID(s.ID)
	if err != nil {
		return 0, fmt.Errorf("import schedule: %w", err)
	}
	if s.Seq != seq {
		return 0, fmt.Errorf("import schedule %s: sequence number %d, want %d", s.ID, s.Seq, seq)
	}
	for i, f := range fires {
		if f.Schedule != s.ID || f.Seq == 0 || (i > 0 && f.Seq <= fires[i-1].Seq) || f.Seq > s.Fires {
			return 0, fmt.Errorf("import schedule %s: firing %d is %s #%d (want its own, in order, at most %d)", s.ID, i+1, f.Schedule, f.Seq, s.Fires)
		}
	}
	return seq, nil
}

// UnmarshalFire decodes a stored fire record (plain or sealed).
func UnmarshalFire(b []byte) (ScheduleFire, error) {
	var f ScheduleFire
	if err := DecodeAny(b, &f); err != nil {
		return f, fmt.Errorf("decode schedule fire: %w", err)
	}
	return f, nil
}
