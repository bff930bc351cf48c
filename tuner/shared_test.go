package tuner

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/internal/proctest"
	"github.com/vllm-tuner/tuner/store"
)

// memShared is a Coordinator over a memStore with the database's rules:
// a config and repeat index is claimed once unless interrupted, and the
// search budget counts running and finished search trials.
type memShared struct {
	st     *memStore
	worker string
	mu     sync.Mutex
	// heartbeat answers the heartbeat of a trial (nil: nil).
	heartbeat func(t store.Trial) error
	beats     int
}

var _ Coordinator = (*memShared)(nil)

func (m *memShared) Claim(ctx context.Context, t store.Trial, maxSearch int) (store.Trial, error) {
	m.st.mu.Lock()
	search := 0
	for _, x := range m.st.trials {
		if x.State == store.StateInterrupted {
			continue
		}
		if x.ConfigID == t.ConfigID && x.Repeat == t.Repeat {
			m.st.mu.Unlock()
			return store.Trial{}, ErrClaimed
		}
		if x.Repeat == 0 {
			search++
		}
	}
	m.st.mu.Unlock()
	if maxSearch > 0 && t.Repeat == 0 && search >= maxSearch {
		return store.Trial{}, ErrTrialBudget
	}
	t.Worker = m.worker
	return m.st.Begin(ctx, t)
}

func (m *memShared) Heartbeat(ctx context.Context, t store.Trial) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.beats++
	if m.heartbeat == nil || t.ID == "" {
		return nil
	}
	return m.heartbeat(t)
}

func (m *memShared) Reap(ctx context.Context) error { return nil }

func sharedConfig(t *testing.T, co Coordinator) Config {
	cfg := testConfig(t)
	cfg.Shared, cfg.Lease, cfg.RetryFor, cfg.SpoolDir = co, 90*time.Millisecond, time.Minute, t.TempDir()
	cfg.Repeats = 1
	return cfg
}

// TestSharedFinishRetried: a trial's end that cannot be written (the
// connection is down) is retried with backoff and kept in the spool
// directory meanwhile; once written the spool file is gone and the study
// is complete.
func TestSharedFinishRetried(t *testing.T) {
	st := &memStore{finishErrs: 3}
	co := &memShared{st: st, worker: "w1"}
	cfg := sharedConfig(t, co)
	var logb proctest.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logb, nil))
	l, err := New(cfg, &fakeRunner{eval: linearEval}, newListProposer(128, 64, 256, 192, 200, 32, 512), st)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := l.Run(context.Background())
	if err != nil || rep.SearchTrials != 6 {
		t.Fatalf("report %d search trials, %v", rep.SearchTrials, err)
	}
	if n := countStates(st.trials)[store.StateOK]; n != 6 {
		t.Fatalf("%d ok trials, want 6: %v", n, st.trials)
	}
	if !strings.Contains(logb.String(), "store trial end failed; retrying") {
		t.Errorf("no retry logged:\n%s", logb.String())
	}
	if ents, _ := os.ReadDir(cfg.SpoolDir); len(ents) != 0 {
		t.Errorf("spool files left after the write: %v", ents)
	}
}

// TestSharedFinishKept: when the end cannot be written within RetryFor the
// run stops with an error naming the file that keeps the result.
func TestSharedFinishKept(t *testing.T) {
	st := &memStore{finishErrs: 1 << 30}
	co := &memShared{st: st, worker: "w1"}
	cfg := sharedConfig(t, co)
	cfg.RetryFor = 300 * time.Millisecond
	l, err := New(cfg, &fakeRunner{eval: linearEval}, newListProposer(128, 64), st)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Run(context.Background())
	file := filepath.Join(cfg.SpoolDir, "1.json")
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("error %v, want one naming %s", err, file)
	}
	b, rerr := os.ReadFile(file)
	if rerr != nil || !bytes.Contains(b, []byte(`"state": "ok"`)) {
		t.Fatalf("kept result %s (%v)", b, rerr)
	}
}

// takenBackStore fails the first trial end (the database is away) and
// meanwhile has the trial taken back, as another worker's reaper does when
// the database returns after the lease ran out.
type takenBackStore struct {
	*memStore
	failed bool
}

func (s *takenBackStore) Finish(ctx context.Context, t store.Trial) error {
	if !s.failed {
		s.failed = true
		s.markInterrupted()
		return errors.New("connection refused")
	}
	return s.memStore.Finish(ctx, t)
}

// TestSharedTakenBackDropped: a trial whose end could not be written while
// the database was away, and that was taken back meanwhile, is dropped with
// a warning, its kept result removed, and the worker goes on: the config
// runs again and the study completes.
func TestSharedTakenBackDropped(t *testing.T) {
	st := &memStore{}
	co := &memShared{st: st, worker: "w1"}
	cfg := sharedConfig(t, co)
	cfg.MaxTrials = 3
	var logb proctest.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logb, nil))
	l, err := New(cfg, &fakeRunner{eval: linearEval}, newListProposer(128, 64, 256, 192), &takenBackStore{memStore: st})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := l.Run(context.Background())
	if err != nil || rep.SearchTrials != 3 {
		t.Fatalf("report %d search trials, %v", rep.SearchTrials, err)
	}
	if st.trials[0].State != store.StateInterrupted || st.trials[1].ConfigID != st.trials[0].ConfigID || st.trials[1].State != store.StateOK {
		t.Fatalf("trials %v: want the taken-back config interrupted, then run again", st.trials)
	}
	if !strings.Contains(logb.String(), "dropping its result") {
		t.Errorf("no warning about the dropped result:\n%s", logb.String())
	}
	if ents, _ := os.ReadDir(cfg.SpoolDir); len(ents) != 0 {
		t.Errorf("kept results left after the trial was dropped: %v", ents)
	}
}

// TestSharedLeaseLost: a trial whose heartbeats fail for a whole lease is
// stopped (its engine must not go on measuring a config another worker
// may take), marked interrupted, and its config runs again from the queue.
func TestSharedLeaseLost(t *testing.T) {
	st := &memStore{}
	co := &memShared{st: st, worker: "w1", heartbeat: func(t store.Trial) error {
		if t.ID == "1" {
			return errors.New("connection refused")
		}
		return nil
	}}
	cfg := sharedConfig(t, co)
	cfg.MaxTrials = 3
	r := &fakeRunner{eval: linearEval, block: map[int]chan struct{}{128: make(chan struct{})}}
	l, err := New(cfg, r, newListProposer(128, 64, 256, 192), st)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := l.Run(context.Background())
	if err != nil || rep.SearchTrials != 3 {
		t.Fatalf("report %d search trials, %v", rep.SearchTrials, err)
	}
	first := st.trials[0]
	if first.State != store.StateInterrupted || first.Result == nil || !strings.Contains(first.Result.Error, ErrLeaseLost.Error()) {
		t.Fatalf("first trial: %s %+v", first.State, first.Result)
	}
	rerun := 0
	for _, tr := range st.trials[1:] {
		if tr.ConfigID == first.ConfigID && tr.State == store.StateOK {
			rerun++
		}
	}
	if rerun != 1 {
		t.Fatalf("config of the lost trial ran %d more times, want 1: %v", rerun, st.trials)
	}
	if r.calls[0] != 128 || r.calls[1] != 128 {
		t.Fatalf("runs %v: want the lost config first again", r.calls)
	}
}

// TestMaxBackoff: retries wait at most 10 s, and at most a third of a
// shared study's lease (at least 100 ms).
func TestMaxBackoff(t *testing.T) {
	for _, c := range []struct{ lease, want time.Duration }{
		{0, 10 * time.Second},
		{3 * time.Second, time.Second},
		{DefaultLease, 10 * time.Second},
		{time.Hour, 10 * time.Second},
		{30 * time.Millisecond, 100 * time.Millisecond},
	} {
		l := &Loop{cfg: Config{Lease: c.lease}}
		if got := l.maxBackoff(); got != c.want {
			t.Errorf("lease %s: max backoff %s, want %s", c.lease, got, c.want)
		}
	}
}
