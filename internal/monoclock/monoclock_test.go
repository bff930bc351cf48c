package monoclock

import (
	"testing"
	"time"
)

// TestNowAdvances: the clock never goes back, and moves by at least a
// sleep's length across one.
func TestNowAdvances(t *testing.T) {
	a := Now()
	time.Sleep(2 * time.Millisecond)
	b := Now()
	if a <= 0 || b-a < int64(2*time.Millisecond) {
		t.Fatalf("CLOCK_MONOTONIC %d then %d across a 2 ms sleep", a, b)
	}
}
