package wakelag

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestProbe: a probe that has woken a few times reports them, its
// quantiles in order, and Stop twice gives the same.
func TestProbe(t *testing.T) {
	p := Start(time.Millisecond)
	waitLags(p, 5)
	l := p.Stop()
	if l.N < 5 || l.P50 > l.P90 || l.P90 > l.Max || l.P50 < 0 {
		t.Errorf("lag %v", l)
	}
	if again := p.Stop(); again != l {
		t.Errorf("second Stop %v, first %v", again, l)
	}
	t.Log(l)
}

// TestHTTPProbe: a round trip to a server that holds each request 2 ms
// reads at least 2 ms; Worst takes each quantile's larger.
func TestHTTPProbe(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(2 * time.Millisecond) }))
	defer ts.Close()
	p := StartHTTP(ts.URL)
	waitLags(p, 3)
	l := p.Stop()
	if l.N < 3 || l.P50 < 2*time.Millisecond || l.P90 > l.Max {
		t.Errorf("round trips %v", l)
	}
	w := Worst(Lag{N: 1, P50: 3, P90: 1, Max: 9}, Lag{N: 2, P50: 1, P90: 4, Max: 5})
	if w != (Lag{N: 2, P50: 3, P90: 4, Max: 9}) {
		t.Errorf("Worst %+v", w)
	}
}

// waitLags waits until p has recorded n lags.
func waitLags(p *Probe, n int) {
	for {
		p.mu.Lock()
		got := len(p.lags)
		p.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
