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
	"slices"
	"sync"
	"time"
)

// Probe sleeps for a fixed period again and again and records how much
// later than asked each sleep ended.
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
	p := &Probe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTimer(period)
		defer t.Stop()
		for {
			asked := time.Now()
			t.Reset(period)
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			lag := time.Since(asked) - period
			p.mu.Lock()
			p.lags = append(p.lags, max(lag, 0))
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

// String is the lag for a test's log.
func (l Lag) String() string {
	return fmt.Sprintf("wake-up lag p50 %v, p90 %v, max %v (%d sleeps)", l.P50, l.P90, l.Max, l.N)
}
