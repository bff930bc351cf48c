package tuner

import (
	"context"
	"fmt"
	"sync"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// cfgN is a one-parameter config.
func cfgN(n int) spaces.Config {
	return spaces.NewConfig(map[string]spaces.Value{"max_num_seqs": spaces.IntValue(n)})
}

// result builds a measured result.
func result(status trial.Status, tp, tpot, vram float64) trial.Result {
	return trial.Result{
		Status:      status,
		Levels:      []trial.Level{{Metrics: trial.Metrics{Completed: 10, OutputThroughput: tp, TPOT: trial.Dist{P99: tpot}, TTFT: trial.Dist{P99: tpot * 10}}}},
		PeakVRAMGiB: vram,
	}
}

// fakeRunner evaluates a config by a function of max_num_seqs; block, when
// set, makes the run with that max_num_seqs wait for cancellation.
type fakeRunner struct {
	mu      sync.Mutex
	eval    func(n, call int) (trial.Result, error)
	calls   []int // max_num_seqs of every run, in order
	block   map[int]chan struct{}
	started chan int // receives max_num_seqs when a blocking run starts
}

var _ Runner = (*fakeRunner)(nil)

func (f *fakeRunner) Run(ctx context.Context, cfg spaces.Config, w trial.Workload) (trial.Result, error) {
	n := cfg.Int("max_num_seqs")
	f.mu.Lock()
	call := len(f.calls)
	f.calls = append(f.calls, n)
	ch := f.block[n]
	if ch != nil {
		delete(f.block, n) // block only once
	}
	f.mu.Unlock()
	if ctx.Err() != nil {
		return trial.Result{Status: trial.StatusFailed, Failure: trial.FailInterrupted}, ctx.Err()
	}
	if ch != nil {
		if f.started != nil {
			f.started <- n
		}
		select {
		case <-ctx.Done():
			return trial.Result{Config: cfg, Status: trial.StatusFailed, Failure: trial.FailInterrupted}, ctx.Err()
		case <-ch:
		}
	}
	r, err := f.eval(n, call)
	r.Config = cfg
	return r, err
}

// linearEval: throughput grows with n, TPOT too, VRAM constant.
func linearEval(n, _ int) (trial.Result, error) {
	return result(trial.StatusOK, float64(n)*10, float64(n)/4, 70), nil
}

// listProposer proposes configs from a list, skipping configs it was told.
type listProposer struct {
	mu    sync.Mutex
	list  []spaces.Config
	told  map[string]int
	asked int
	err   error // returned when the list is used up (default ErrSpaceExhausted)
}

var _ Proposer = (*listProposer)(nil)

func newListProposer(ns ...int) *listProposer {
	p := &listProposer{told: map[string]int{}}
	for _, n := range ns {
		p.list = append(p.list, cfgN(n))
	}
	return p
}

func (p *listProposer) Ask(ctx context.Context) (spaces.Config, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return spaces.Config{}, err
	}
	for p.asked < len(p.list) {
		c := p.list[p.asked]
		p.asked++
		if p.told[c.ID()] == 0 {
			return c, nil
		}
	}
	if p.err != nil {
		return spaces.Config{}, p.err
	}
	return spaces.Config{}, fmt.Errorf("list done: %w", ErrSpaceExhausted)
}

func (p *listProposer) Tell(cfg spaces.Config, res *trial.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.told[cfg.ID()]++
}

// memStore is an in-memory Store with the store's semantics: Begin appends
// a running record, Finish replaces it.
type memStore struct {
	mu     sync.Mutex
	trials []store.Trial
	failOn string // "begin" or "finish": return an error
	// finishErrs makes the next Finish calls fail (a lost connection).
	finishErrs int
}

var _ Store = (*memStore)(nil)

func (s *memStore) Begin(ctx context.Context, t store.Trial) (store.Trial, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failOn == "begin" {
		return store.Trial{}, fmt.Errorf("disk full")
	}
	t.Seq = uint64(len(s.trials)) + 1 // 1-based, as the store numbers
	t.ID = fmt.Sprint(t.Seq)
	s.trials = append(s.trials, t)
	return t, nil
}

func (s *memStore) Finish(ctx context.Context, t store.Trial) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failOn == "finish" {
		return fmt.Errorf("disk full")
	}
	if s.finishErrs > 0 {
		s.finishErrs--
		return fmt.Errorf("connection refused")
	}
	if t.Seq == 0 || t.Seq > uint64(len(s.trials)) || s.trials[t.Seq-1].State != store.StateRunning {
		return fmt.Errorf("finish trial %d: not running: %w", t.Seq, store.ErrState)
	}
	s.trials[t.Seq-1] = t
	return nil
}

func (s *memStore) Trials(ctx context.Context) ([]store.Trial, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.Trial, len(s.trials))
	copy(out, s.trials)
	return out, nil
}

// markInterrupted does what the store does on open: running -> interrupted.
func (s *memStore) markInterrupted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.trials {
		if s.trials[i].State == store.StateRunning {
			s.trials[i].State = store.StateInterrupted
		}
	}
}
