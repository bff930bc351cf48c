package wakelag

import (
	"testing"
	"time"
)

// TestProbe: a probe that has woken a few times reports them, its
// quantiles in order, and Stop twice gives the same.
func TestProbe(t *testing.T) {
	p := Start(time.Millisecond)
	for {
		p.mu.Lock()
		n := len(p.lags)
		p.mu.Unlock()
		if n >= 5 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	l := p.Stop()
	if l.N < 5 || l.P50 > l.P90 || l.P90 > l.Max || l.P50 < 0 {
		t.Errorf("lag %v", l)
	}
	if again := p.Stop(); again != l {
		t.Errorf("second Stop %v, first %v", again, l)
	}
	t.Log(l)
}
