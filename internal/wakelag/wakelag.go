// Package wakelag measures how late a sleeping goroutine wakes on this
// machine while a test runs, so that a test comparing live (wall-clock)
// figures with a model can allow for what the machine did instead of
// assuming a quiet one: on 2 cores shared with other work every hand-off
// between goroutines and processes (a timer, a socket read, a flush) waits
// for a core, by tens of microseconds on a quiet machine and by
// milliseconds at a load average of 8.
package wakelag

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Probe sleeps for a fixed period again and again and records how much
// later than asked each sleep ended (Start), or times round trips to a
// server (StartHTTP).
type Probe struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	lags []time.Duration
}

// Start starts a probe that sleeps every period (1 ms when <= 0).
func Start(period time.Duration) *Probe {
	if period <= 0 {
		period = time.Millisecond
	}
	t := time.NewTimer(period)
	t.Stop()
	return start(func(stop <-chan struct{}) (time.Duration, bool) {
		asked := time.Now()
		t.Reset(period)
		select {
		case <-stop:
			return 0, false
		case <-t.C:
		}
		return max(time.Since(asked)-period, 0), true
	}, func() { t.Stop() })
}

// StartHTTP starts a probe of another process: it GETs url again and
// again, one request at a time, and records each answered round trip (a
// refused one, once the server has stopped, measures nothing). A sleep probe sees only this process's
// scheduling; a server in another process may stall while this one runs
// (at load 20 on 2 cores, vllm-sim held a request 150 ms while this
// process's longest wake-up lag was 28 ms), and a round trip through it
// waits for both. About 100-300 µs on a quiet machine.
func StartHTTP(url string) *Probe {
	cl := &http.Client{Timeout: time.Minute}
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	return start(func(stop <-chan struct{}) (time.Duration, bool) {
		// A millisecond between requests, as a sleep probe's period.
		pause.Reset(time.Millisecond)
		select {
		case <-stop:
			return 0, false
		case <-pause.C:
		}
		t0 := time.Now()
		resp, err := cl.Get(url)
		if err != nil {
			return -1, true // the server is gone (or not there yet): nothing measured
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(t0), true
	}, func() { pause.Stop(); cl.CloseIdleConnections() })
}

// start runs measure until it reports false or the probe stops, then done;
// a negative lag is not recorded.
func start(measure func(stop <-chan struct{}) (time.Duration, bool), done func()) *Probe {
	p := &Probe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer done()
		for {
			lag, ok := measure(p.stop)
			if !ok {
				return
			}
			if lag < 0 {
				continue
			}
			p.mu.Lock()
			p.lags = append(p.lags, lag)
			p.mu.Unlock()
		}
	}()
	return p
}

// Lag is what a probe measured: quantiles of the wake-up delay.
type Lag struct {
	N             int
	P50, P90, Max time.Duration
}

// Stop ends the probe and returns what it measured (zero when it never
// woke).
func (p *Probe) Stop() Lag {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.lags) == 0 {
		return Lag{}
	}
	s := slices.Clone(p.lags)
	slices.Sort(s)
	q := func(f float64) time.Duration { return s[min(len(s)-1, int(f*float64(len(s))))] }
	return Lag{N: len(s), P50: q(0.5), P90: q(0.9), Max: s[len(s)-1]}
}

// Worst is the larger of each quantile of a and b (and the larger count):
// what a request crossing both, a sleep probe's process and an HTTP
// probe's server, may wait.
func Worst(a, b Lag) Lag {
	return Lag{N: max(a.N, b.N), P50: max(a.P50, b.P50), P90: max(a.P90, b.P90), Max: max(a.Max, b.Max)}
}

// String is the lag for a test's log.
func (l Lag) String() string {
	return fmt.Sprintf("wake-up lag p50 %v, p90 %v, max %v (%d sleeps)", l.P50, l.P90, l.Max, l.N)
}
