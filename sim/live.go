package sim

import (
	"context"
	"sync"
	"time"
)

// liveReq is the HTTP server's side of a request: the engine driver sends
// it one event per streamed chunk.
type liveReq struct {
	ch        chan liveEvent
	arrived   time.Time
	scheduled time.Time // start of the first step that scheduled it (zero: not yet)
}

type liveEvent struct {
	tokens   int
	first    bool
	finished bool
	err      error
	at       time.Time
}

// liveEngine drives one Engine on the real clock: it runs a step, sleeps
// until the step's end on the wall clock, then delivers the step's outputs.
// Handlers add and abort requests under mu.
//
// Steps are paced against absolute deadlines: a busy period that starts at
// wall time w0 maps virtual time t (since the period's start) to
// w0 + t*scale, and each step sleeps until its own end's deadline, or not at
// all when it is already late. Timer overshoot and scheduling delays (a
// millisecond or two a step on a loaded machine) are then made up by the
// next steps instead of adding up; pacing each step relative to the end of
// the previous one ran 20-25% slower than the virtual clock. The anchor
// resets when the engine goes idle.
type liveEngine struct {
	mu    sync.Mutex
	e     *Engine
	wake  chan struct{}
	scale float64 // seconds of real time per simulated second
	dead  error   // set when the engine died; requests fail
	onIt  func(tokens int)
}

func newLiveEngine(e *Engine, scale float64) *liveEngine {
	return &liveEngine{e: e, wake: make(chan struct{}, 1), scale: scale}
}

func (le *liveEngine) snapshot() engineSnapshot {
	le.mu.Lock()
	defer le.mu.Unlock()
	return engineSnapshot{running: le.e.Running(), waiting: le.e.Waiting(), kvUsage: le.e.KVUsage(), stats: le.e.Stats}
}

// add queues r, or fails it at once when the engine is dead.
func (le *liveEngine) add(r *Request) error {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.dead != nil {
		return le.dead
	}
	le.e.Add(r)
	select {
	case le.wake <- struct{}{}:
	default:
	}
	return nil
}

func (le *liveEngine) abort(r *Request) {
	le.mu.Lock()
	le.e.Abort(r)
	le.mu.Unlock()
}

// kill fails every queued and running request with err.
func (le *liveEngine) kill(err error) {
	le.mu.Lock()
	defer le.mu.Unlock()
	le.dead = err
	for _, list := range [][]*Request{le.e.running, le.e.waiting, le.e.incoming} {
		for _, r := range list {
			if r.live != nil {
				r.live.ch <- liveEvent{err: err, at: time.Now()}
			}
		}
	}
	for _, r := range append(append(append([]*Request(nil), le.e.running...), le.e.waiting...), le.e.incoming...) {
		le.e.Abort(r)
	}
}

// run steps the engine until ctx is done.
func (le *liveEngine) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var p pacer
	for {
		le.mu.Lock()
		if le.dead != nil || !le.e.HasWork() {
			le.mu.Unlock()
			p.idle()
			select {
			case <-le.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		start := time.Now()
		d, outs := le.e.Step()
		tokens := le.e.lastTokens
		for _, r := range le.e.sched {
			if r.live != nil && r.live.scheduled.IsZero() {
				r.live.scheduled = start
			}
		}
		le.mu.Unlock()
		if le.onIt != nil && d > 0 {
			le.onIt(tokens)
		}
		if d <= 0 {
			d = 1e-3 // nothing schedulable (should not happen): back off
		}
		if wait := time.Until(p.next(start, d*le.scale)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		now := time.Now()
		le.mu.Lock()
		if le.dead == nil {
			for _, o := range outs {
				if o.Req.live != nil {
					o.Req.live.ch <- liveEvent{tokens: o.Tokens, first: o.First, finished: o.Finished, at: now}
				}
			}
		}
		le.mu.Unlock()
	}
}

// pacer holds the wall-clock deadline of the last step of a busy period.
type pacer struct {
	deadline time.Time // zero: idle, the next step starts a new period
}

// idle ends the busy period: the next step is anchored at its own start.
func (p *pacer) idle() { p.deadline = time.Time{} }

// next returns the wall-clock deadline of a step of dur real seconds that
// started (was computed) at start: the previous deadline plus dur, so that
// a late step does not push back every later one.
func (p *pacer) next(start time.Time, dur float64) time.Time {
	if p.deadline.IsZero() {
		p.deadline = start
	}
	p.deadline = p.deadline.Add(time.Duration(dur * float64(time.Second)))
	return p.deadline
}
