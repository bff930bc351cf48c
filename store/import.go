package store

import (
	"errors"
	"fmt"
)

// ErrExists reports an import into a study that already has trials.
var ErrExists = errors.New("already exists")

// CheckImport verifies that trials are a study's complete record set for
// an import: numbered 1..n in order, each belonging to the study, whose
// key gives its ID.
func CheckImport(st Study, trials []Trial) error {
	if key, err := st.Key.Normalize(); err != nil || key.ID() != st.ID {
		return fmt.Errorf("import study %s: its key does not give its ID", st.ID)
	}
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
