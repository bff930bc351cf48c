package store

import (
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

// TestStateRule: the one state rule of every door. No result is
// interrupted (a failed record carries the result that says why); an
// interrupted failure is interrupted; ok and unstable as measured.
func TestStateRule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		res      *trial.Result
		want     State
		measured bool
	}{
		{"no result", nil, StateInterrupted, false},
		{"ok", &trial.Result{Status: trial.StatusOK}, StateOK, true},
		{"unstable", &trial.Result{Status: trial.StatusUnstable}, StateUnstable, true},
		{"oom", &trial.Result{Status: trial.StatusFailed, Failure: trial.FailOOM}, StateFailed, true},
		{"interrupted", &trial.Result{Status: trial.StatusFailed, Failure: trial.FailInterrupted}, StateInterrupted, false},
	} {
		got := StateOf(tc.res)
		if got != tc.want || got.Measured() != tc.measured || !got.Finished() {
			t.Errorf("%s: %s (measured %v), want %s (measured %v)", tc.name, got, got.Measured(), tc.want, tc.measured)
		}
	}
	if StateRunning.Finished() || StateRunning.Measured() {
		t.Error("running counts as finished")
	}
	// A failed record without its result is refused.
	bad := Trial{StudyID: "0123456789ab", Seq: 1, ID: "0123456789ab-1", State: StateFailed}
	if err := bad.Validate(); err == nil {
		t.Error("a failed trial without a result passes validation")
	}
}
