package sim

import (
	"testing"
	"time"
)

// TestPacerAbsoluteDeadlines: a step that starts late (timer overshoot,
// scheduling delay) does not push back later deadlines; after idle the
// next step is anchored at its own start.
func TestPacerAbsoluteDeadlines(t *testing.T) {
	w0 := time.Unix(1000, 0)
	ms := func(n float64) time.Time { return w0.Add(time.Duration(n * float64(time.Millisecond))) }
	var p pacer
	steps := []struct {
		start, dur, want float64 // ms from w0
	}{
		{0, 10, 10},
		{11.5, 10, 20}, // 1.5 ms overshoot: still due at 20
		{21.5, 10, 30}, // again
		{45, 10, 40},   // far behind: due in the past, so no sleep
		{45.2, 10, 50}, // catches up
		{50.1, 0.5, 50.5},
	}
	for i, s := range steps {
		if got := p.next(ms(s.start), s.dur/1e3); !got.Equal(ms(s.want)) {
			t.Fatalf("step %d: deadline %v ms, want %v", i, got.Sub(w0).Seconds()*1e3, s.want)
		}
	}
	p.idle()
	if got := p.next(ms(200), 0.01); !got.Equal(ms(210)) {
		t.Errorf("after idle: deadline %v ms, want 210", got.Sub(w0).Seconds()*1e3)
	}
	// No drift over many steps with a constant overshoot.
	var q pacer
	start, end := w0, time.Time{}
	for range 1000 {
		end = q.next(start, 0.005)
		start = end.Add(1500 * time.Microsecond) // woke 1.5 ms late
	}
	if want := w0.Add(5 * time.Second); !end.Equal(want) {
		t.Errorf("1000 steps of 5 ms end at %v, want %v", end.Sub(w0), want.Sub(w0))
	}
}
