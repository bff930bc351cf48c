package tuner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/vllm-tuner/tuner/internal/proctest"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(t *testing.T) Config {
	t.Helper()
	slo, err := trial.ParseSLO("tpot_p99<=50ms")
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Study = "s1"
	c.SLO = slo
	c.Default = cfgN(128)
	c.MaxTrials = 6
	c.Budget = 0
	c.Patience = 0
	c.Finalists = 2
	c.Repeats = 3
	return c
}

func countStates(trials []store.Trial) map[store.State]int {
	m := map[store.State]int{}
	for _, t := range trials {
		m[t.State]++
	}
	return m
}

func TestLoopBudgetRepeatsAndRecommendation(t *testing.T) {
	// tpot = n/4 ms: n <= 200 meets tpot_p99<=50ms; throughput = 10n.
	st := &memStore{}
	r := &fakeRunner{eval: linearEval}
	p := newListProposer(128, 64, 256, 192, 200, 32, 512)
	var out bytes.Buffer
	cfg := testConfig(t)
	cfg.Progress = &out
	l, err := New(cfg, r, p, st)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.StopReason != StopTrials || rep.SearchTrials != 6 {
		t.Fatalf("stop %q after %d search trials, want %q after 6", rep.StopReason, rep.SearchTrials, StopTrials)
	}
	// Finalists: the two best feasible (200, 192) and vLLM's default
	// (128), in 3 interleaved rounds, each the default first and then the
	// two others, and a last run of the default closing the last round.
	if rep.RepeatTrials != 10 || len(r.calls) != 16 || r.calls[15] != 128 {
		t.Fatalf("repeats %d, runner calls %v; want 10 repeats, 16 calls, the last of the default", rep.RepeatTrials, r.calls)
	}
	for k := 6; k < 15; k += 3 {
		round := slices.Sorted(slices.Values(r.calls[k : k+3]))
		if fmt.Sprint(round) != "[128 192 200]" || r.calls[k] != 128 {
			t.Fatalf("round %d ran %v, want 128 first, then 192 and 200", (k-6)/3+1, r.calls[k:k+3])
		}
	}
	if rep.Recommended == nil || rep.Recommended.Config.Int("max_num_seqs") != 200 {
		t.Fatalf("recommended %+v, want max_num_seqs=200", rep.Recommended)
	}
	if rep.Recommended.Throughput.N != 4 {
		t.Fatalf("recommended has %d measurements, want 4", rep.Recommended.Throughput.N)
	}
	if rep.Default == nil || rep.GainPct == nil || rep.Default.Throughput.N != 5 || !rep.Gain.Significant || rep.RecommendedIsDefault {
		t.Fatalf("default %v gain %v: want both", rep.Default, rep.GainPct)
	}
	if want := (2000.0/1280 - 1) * 100; abs(*rep.GainPct-want) > 1e-9 {
		t.Fatalf("gain %.3f%%, want %.3f%%", *rep.GainPct, want)
	}
	trials, _ := st.Trials(context.Background())
	if c := countStates(trials); c[store.StateOK] != 16 || len(trials) != 16 {
		t.Fatalf("stored states %v of %d, want 16 ok", c, len(trials))
	}
	for i, tr := range trials {
		if tr.Seq != uint64(i+1) || tr.Result == nil || tr.Ended.IsZero() {
			t.Fatalf("trial %d stored incompletely: %+v", i, tr)
		}
		if want := PhaseSearch; i >= 6 {
			if tr.Repeat == 0 {
				t.Fatalf("trial %d phase %s, want repeat", i, phaseOf(tr))
			}
		} else if phaseOf(tr) != want {
			t.Fatalf("trial %d phase %s, want search", i, phaseOf(tr))
		}
	}
	// Front over feasible configs (n <= 200): throughput up, tpot up, VRAM
	// equal: every feasible config is non-dominated.
	if len(rep.Front) != 5 {
		t.Fatalf("front size %d, want 5 (32, 64, 128, 192, 200): %+v", len(rep.Front), rep.Front)
	}
	lines := strings.Count(out.String(), "\n")
	if lines != 32 { // two lines per trial
		t.Fatalf("progress wrote %d lines, want 32:\n%s", lines, out.String())
	}
	if !strings.Contains(out.String(), "trial 6/6 ") || !strings.Contains(out.String(), "re-measurement 10/10 ") || !strings.Contains(out.String(), "best 2000.0 output_throughput") {
		t.Fatalf("progress lacks the final status:\n%s", out.String())
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestLoopInterruptThenResume(t *testing.T) {
	st := &memStore{}
	order := []int{128, 64, 256, 192, 32, 96, 160}
	cfg := testConfig(t)
	cfg.Repeats = 0

	// First run: the third trial (256) blocks until we cancel.
	r1 := &fakeRunner{eval: linearEval, block: map[int]chan struct{}{256: make(chan struct{})}, started: make(chan int, 1)}
	l1, err := New(cfg, r1, newListProposer(order...), st)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-r1.started; cancel() }()
	rep, err := l1.Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err %v, want context.Canceled", err)
	}
	if rep.StopReason != StopInterrupted || rep.SearchTrials != 2 {
		t.Fatalf("interrupted report: %q after %d trials", rep.StopReason, rep.SearchTrials)
	}
	trials, _ := st.Trials(context.Background())
	if len(trials) != 3 || trials[2].State != store.StateInterrupted || trials[2].Result.Failure != trial.FailInterrupted {
		t.Fatalf("after interrupt: %+v", trials)
	}

	// Without --resume the study is refused.
	if _, err := mustLoop(t, cfg, &fakeRunner{eval: linearEval}, newListProposer(order...), st).Run(context.Background()); !errors.Is(err, ErrStudyExists) {
		t.Fatalf("second run without resume: %v, want ErrStudyExists", err)
	}

	// Resume with a fresh proposer: it is told the two finished trials, the
	// interrupted config runs first, the study ends with 6 search trials.
	cfg.Resume = true
	p2 := newListProposer(order...)
	r2 := &fakeRunner{eval: linearEval}
	rep, err = mustLoop(t, cfg, r2, p2, st).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.SearchTrials != 6 || rep.RanThisRun != 4 {
		t.Fatalf("resumed: %d search trials, %d this run; want 6 and 4", rep.SearchTrials, rep.RanThisRun)
	}
	if r2.calls[0] != 256 {
		t.Fatalf("resumed run order %v: the interrupted config 256 must run first", r2.calls)
	}
	trials, _ = st.Trials(context.Background())
	seen := map[string]int{}
	finished := 0
	for _, tr := range trials {
		if tr.State.Measured() {
			finished++
			seen[tr.ConfigID]++
		}
	}
	if finished != 6 || len(seen) != 6 {
		t.Fatalf("finished %d trials over %d configs, want 6 distinct (none lost or repeated): %v", finished, len(seen), seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("config %s finished %d times", id, n)
		}
	}
	if p2.told[cfgN(128).ID()] != 1 || p2.told[cfgN(64).ID()] != 1 || p2.told[cfgN(256).ID()] != 1 {
		t.Fatalf("history not told to the proposer exactly once: %v", p2.told)
	}

	// A second resume of a finished study runs nothing.
	r3 := &fakeRunner{eval: linearEval}
	rep, err = mustLoop(t, cfg, r3, newListProposer(order...), st).Run(context.Background())
	if err != nil || len(r3.calls) != 0 || rep.StopReason != StopTrials {
		t.Fatalf("resume of a finished study: err %v, calls %v, stop %q", err, r3.calls, rep.StopReason)
	}
}

func TestLoopResumeAfterCrashMidTrial(t *testing.T) {
	// A dead process leaves a running record; the store marks it
	// interrupted on open; resume re-runs it once.
	st := &memStore{}
	if _, err := st.Begin(context.Background(), store.Trial{State: store.StateRunning, Config: cfgN(64), ConfigID: cfgN(64).ID()}); err != nil {
		t.Fatal(err)
	}
	st.markInterrupted()
	cfg := testConfig(t)
	cfg.Resume, cfg.MaxTrials, cfg.Repeats = true, 2, 0
	r := &fakeRunner{eval: linearEval}
	if _, err := mustLoop(t, cfg, r, newListProposer(128, 64, 32), st).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(r.calls) != 2 || r.calls[0] != 64 || r.calls[1] != 128 {
		t.Fatalf("calls %v, want [64 128]", r.calls)
	}
}

func TestLoopResumeDuringRepeats(t *testing.T) {
	st := &memStore{}
	cfg := testConfig(t)
	cfg.MaxTrials, cfg.Finalists, cfg.Repeats = 3, 1, 3
	// Block the first re-measurement (of the finalist, 192, or of vLLM's
	// default, 128, whichever the first round runs first).
	block := make(chan struct{})
	r1 := &fakeRunner{eval: linearEval, started: make(chan int, 1)}
	l1 := mustLoop(t, cfg, r1, newListProposer(128, 192, 32), st)
	ctx, cancel := context.WithCancel(context.Background())
	r1.block = map[int]chan struct{}{}
	// Arrange the block once the search trials are done: wrap eval.
	r1.eval = func(n, call int) (trial.Result, error) {
		if call == 2 { // last search trial: arm the block for the repeats
			r1.mu.Lock()
			r1.block[128], r1.block[192] = block, block
			r1.mu.Unlock()
		}
		return linearEval(n, call)
	}
	go func() { <-r1.started; cancel() }()
	if _, err := l1.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	cfg.Resume = true
	r2 := &fakeRunner{eval: linearEval}
	rep, err := mustLoop(t, cfg, r2, newListProposer(128, 192, 32), st).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(slices.Sorted(slices.Values(r2.calls))); got != "[128 128 128 128 192 192 192]" {
		t.Fatalf("resumed repeat calls %v, want 3 rounds of 128 and 192 and the closing run of 128", r2.calls)
	}
	if rep.Recommended == nil || rep.Recommended.Throughput.N != 4 || rep.RepeatTrials != 7 {
		t.Fatalf("report after resumed repeats: %+v", rep)
	}
}

func mustLoop(t *testing.T, cfg Config, r Runner, p Proposer, s Store) *Loop {
	t.Helper()
	l, err := New(cfg, r, p, s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLoopStops(t *testing.T) {
	tests := []struct {
		name   string
		mod    func(*Config)
		eval   func(n, call int) (trial.Result, error)
		list   []int
		reason string
		runs   int
	}{
		{
			name: "patience",
			mod:  func(c *Config) { c.MaxTrials, c.Patience = 0, 3 },
			// Every later config is dominated by the first (n=200).
			eval:   func(n, _ int) (trial.Result, error) { return result(trial.StatusOK, float64(n), 10, 70), nil },
			list:   []int{200, 100, 90, 80, 70, 60, 50},
			reason: StopPatience,
			runs:   4,
		},
		{
			name:   "exhausted",
			mod:    func(c *Config) { c.MaxTrials = 10 },
			eval:   linearEval,
			list:   []int{1, 2, 3},
			reason: StopExhausted,
			runs:   3,
		},
		{
			name:   "duplicates are told, not run",
			mod:    func(c *Config) { c.MaxTrials = 10 },
			eval:   linearEval,
			list:   []int{1, 1, 1, 2},
			reason: StopExhausted,
			runs:   2,
		},
		{
			name:   "wall budget",
			mod:    func(c *Config) { c.MaxTrials, c.Budget = 0, time.Nanosecond },
			eval:   linearEval,
			list:   []int{1, 2, 3},
			reason: StopBudget,
			runs:   0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.Repeats = 0
			tt.mod(&cfg)
			r := &fakeRunner{eval: tt.eval}
			p := newListProposer(tt.list...)
			p.told = map[string]int{}
			// the list proposer skips told configs; for the duplicate case
			// use one that does not.
			var prop Proposer = p
			if strings.HasPrefix(tt.name, "duplicates") {
				prop = &dupProposer{p}
			}
			rep, err := mustLoop(t, cfg, r, prop, &memStore{}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if rep.StopReason != tt.reason || len(r.calls) != tt.runs {
				t.Fatalf("stop %q after %d runs (%v), want %q after %d", rep.StopReason, len(r.calls), r.calls, tt.reason, tt.runs)
			}
		})
	}
}

// fakeClock is a wall clock that only the fake runner moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestLoopBudgetReservesForExistingFinalists is issue 13's case: --budget
// 90s with --trials 50 and 11 s trials ran one search trial and two
// re-measurements (33 s), because the reserve assumed all three finalist
// slots and the default filled. Now the reserve covers the finalists that
// exist (and one more): the search goes on while that fits, every planned
// re-measurement runs, and the run stays within the budget. (101 s: the
// re-measurement's closing run of the default takes one trial more.)
func TestLoopBudgetReservesForExistingFinalists(t *testing.T) {
	const trialDur, budget = 11 * time.Second, 101 * time.Second
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	r := &fakeRunner{eval: func(n, call int) (trial.Result, error) {
		clock.Advance(trialDur)
		return linearEval(n, call)
	}}
	cfg := testConfig(t)
	cfg.MaxTrials, cfg.Budget, cfg.Finalists, cfg.Repeats = 50, budget, 3, 3
	l := mustLoop(t, cfg, r, newListProposer(128, 64, 192, 32, 96, 160), &memStore{})
	l.now = clock.Now
	rep, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.StopReason != StopBudget || rep.SearchTrials < 2 {
		t.Fatalf("stopped (%s) after %d search trials; want the budget to allow at least 2", rep.StopReason, rep.SearchTrials)
	}
	if rep.Elapsed > budget {
		t.Fatalf("ran %s, past the %s budget", rep.Elapsed, budget)
	}
	for _, c := range rep.Finalists {
		want := cfg.Repeats + 1
		if c.ConfigID == cfg.Default.ID() {
			want++ // the closing run
		}
		if c.Throughput.N != want {
			t.Fatalf("finalist %s measured %d times, want %d", c.ConfigID, c.Throughput.N, want)
		}
	}
	if rep.Remeasure != "" {
		t.Fatalf("re-measurement cut: %s", rep.Remeasure)
	}
	if unused := budget - rep.Elapsed; unused >= 3*trialDur {
		t.Fatalf("%s of the budget unused (%d search trials, %d repeats)", unused, rep.SearchTrials, rep.RepeatTrials)
	}
}

// dupProposer proposes its list as is, repeats included.
type dupProposer struct{ *listProposer }

func (d *dupProposer) Ask(ctx context.Context) (spaces.Config, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.asked >= len(d.list) {
		return spaces.Config{}, ErrSpaceExhausted
	}
	d.asked++
	return d.list[d.asked-1], nil
}

func TestLoopTrialTimeoutAndFailures(t *testing.T) {
	cfg := testConfig(t)
	cfg.Repeats, cfg.MaxTrials, cfg.TrialTimeout = 0, 3, 50*time.Millisecond
	st := &memStore{}
	r := &fakeRunner{
		eval: func(n, call int) (trial.Result, error) {
			if n == 2 {
				return trial.Result{Status: trial.StatusFailed, Failure: trial.FailOOM, Error: "CUDA out of memory"}, nil
			}
			return linearEval(n, call)
		},
		block: map[int]chan struct{}{3: make(chan struct{})}, // never released: times out
	}
	rep, err := mustLoop(t, cfg, r, newListProposer(1, 2, 3), st).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	trials, _ := st.Trials(context.Background())
	if trials[1].Verdict() != "failed:oom" || trials[2].Verdict() != "failed:trial_timeout" {
		t.Fatalf("verdicts %q %q", trials[1].Verdict(), trials[2].Verdict())
	}
	if rep.FailedTrials != 2 || rep.SearchTrials != 3 {
		t.Fatalf("report %+v", rep)
	}
}

func TestLoopInfrastructureErrors(t *testing.T) {
	cfg := testConfig(t)
	cfg.Repeats = 0
	t.Run("runner", func(t *testing.T) {
		r := &fakeRunner{eval: func(int, int) (trial.Result, error) { return trial.Result{}, errors.New("no free port") }}
		st := &memStore{}
		_, err := mustLoop(t, cfg, r, newListProposer(1, 2), st).Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "no free port") {
			t.Fatalf("err %v", err)
		}
		trials, _ := st.Trials(context.Background())
		if len(trials) != 1 || trials[0].State != store.StateInterrupted {
			t.Fatalf("trial after infrastructure error: %+v (want interrupted, resumable)", trials)
		}
	})
	for _, where := range []string{"begin", "finish"} {
		t.Run("store "+where, func(t *testing.T) {
			r := &fakeRunner{eval: linearEval}
			_, err := mustLoop(t, cfg, r, newListProposer(1, 2), &memStore{failOn: where}).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "disk full") {
				t.Fatalf("err %v", err)
			}
			if where == "begin" && len(r.calls) != 0 {
				t.Fatal("engine started although the running record was not written")
			}
		})
	}
}

func TestLoopNoFeasible(t *testing.T) {
	cfg := testConfig(t)
	cfg.Repeats, cfg.MaxTrials = 0, 3
	rep, err := mustLoop(t, cfg, &fakeRunner{eval: linearEval}, newListProposer(400, 300, 1000), &memStore{}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recommended != nil || !strings.Contains(rep.NoFeasible, "closest is config "+cfgN(300).ID()) ||
		!strings.Contains(rep.NoFeasible, "tpot_p99=75 ms") {
		t.Fatalf("no-feasible report: %+v", rep)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.MaxTrials, c.Budget, c.Patience = 0, 0, 0 },
		func(c *Config) { c.TrialTimeout = -1 },
		func(c *Config) { c.Metrics.Latency = "" },
		func(c *Config) { c.Repeats = -1 },
	}
	for i, mod := range bad {
		c := DefaultConfig()
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("case %d: invalid config accepted", i)
		}
	}
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestLiveProgressStopsItsGoroutine(t *testing.T) {
	cfg := testConfig(t)
	out := &proctest.Buffer{}
	cfg.Progress, cfg.Terminal, cfg.Repeats = out, true, 0
	if _, err := mustLoop(t, cfg, &fakeRunner{eval: linearEval}, newListProposer(1, 2, 3), &memStore{}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "trial #2 [search]") {
		t.Fatalf("live progress output lacks trial lines: %q", out.String())
	}
	// goleak in TestMain checks that the ticker goroutine ended.
}

// TestLiveProgressFitsTheTerminal: on an 80-column terminal no rendered
// line is wider than 80 (the old ~130-column line wrapped and left a new
// line behind every second); trial lines printed above the bar are not
// the bar and may be longer.
func TestLiveProgressFitsTheTerminal(t *testing.T) {
	for _, width := range []int{80, 60} {
		cfg := testConfig(t)
		out := &proctest.Buffer{}
		cfg.Progress, cfg.Terminal, cfg.Width, cfg.MaxTrials = out, true, width, 120
		cfg.Study = "a-study-with-a-long-name"
		list := make([]int, 0, 12)
		for i := range 12 {
			list = append(list, 100+i)
		}
		if _, err := mustLoop(t, cfg, &fakeRunner{eval: linearEval}, newListProposer(list...), &memStore{}).Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		bars := 0
		for _, line := range strings.FieldsFunc(out.String(), func(r rune) bool { return r == '\r' || r == '\n' }) {
			if strings.HasPrefix(line, "trial #") || strings.TrimSpace(line) == "" {
				continue
			}
			bars++
			if n := len([]rune(strings.TrimRight(line, " "))); n > width {
				t.Fatalf("width %d: bar line of %d columns: %q", width, n, line)
			}
		}
		if bars == 0 {
			t.Fatalf("no bar rendered: %q", out.String())
		}
	}
}

// TestLoopEnqueue: a known config (today's production flags) runs right
// after vLLM's default as a search trial, is re-measured with it, and the
// report states the recommendation's gain over it; a resumed study does
// not run it again.
func TestLoopEnqueue(t *testing.T) {
	st := &memStore{}
	r := &fakeRunner{eval: linearEval}
	cfg := testConfig(t)
	cfg.MaxTrials, cfg.Finalists = 4, 1
	cfg.Enqueue = []spaces.Config{cfgN(150), cfgN(128)} // the default too: not run twice
	rep, err := mustLoop(t, cfg, r, newListProposer(128, 64, 200, 32, 96), st).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(r.calls[:4]); got != "[128 150 64 200]" {
		t.Fatalf("search runs %v, want the default, the enqueued 150, then the proposals", got)
	}
	// Re-measured: the finalist (200), the default (128) and 150.
	if got := fmt.Sprint(slices.Sorted(slices.Values(r.calls[4:]))); got != "[128 128 128 128 150 150 150 200 200 200]" {
		t.Fatalf("repeat runs %v", r.calls[4:])
	}
	if len(rep.Enqueued) != 2 || rep.Enqueued[0].ConfigID != cfgN(150).ID() || rep.Enqueued[0].Throughput.N != 4 || rep.Enqueued[0].Gain == nil {
		t.Fatalf("enqueued in the report: %+v", rep.Enqueued)
	}
	if want := (2000.0/1500 - 1) * 100; abs(rep.Enqueued[0].Gain.Pct-want) > 1e-9 {
		t.Fatalf("gain over the enqueued config %.3f%%, want %.3f%%", rep.Enqueued[0].Gain.Pct, want)
	}
	// Resume with a larger budget: 150 is not run again.
	cfg.MaxTrials, cfg.Resume = 5, true
	r2 := &fakeRunner{eval: linearEval}
	if _, err := mustLoop(t, cfg, r2, newListProposer(128, 64, 200, 32, 96), st).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(r2.calls); got != "[32]" {
		t.Fatalf("resumed runs %v, want [32]", got)
	}
}

// TestTrialLineMarksEstimatedVRAM: the per-trial progress line marks a VRAM
// estimated from --gpu-memory-utilization.
func TestTrialLineMarksEstimatedVRAM(t *testing.T) {
	l := mustLoop(t, testConfig(t), &fakeRunner{eval: linearEval}, newListProposer(1), &memStore{})
	for _, tt := range []struct {
		source, want string
	}{{"estimate", "vram=~70.0GiB"}, {"nvml", "vram=70.0GiB"}} {
		r := result(trial.StatusOK, 1000, 20, 70)
		r.VRAMSource = tt.source
		if got := l.trialLine(&store.Trial{State: store.StateOK, Result: &r}); !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q lacks %q", tt.source, got, tt.want)
		}
	}
}

// slowAsk is a proposer whose every ask takes a while on the fake clock,
// as TPE and the surrogate do on a long history.
type slowAsk struct {
	*listProposer
	clock *fakeClock
	d     time.Duration
}

func (p *slowAsk) Ask(ctx context.Context) (spaces.Config, error) {
	p.clock.Advance(p.d)
	return p.listProposer.Ask(ctx)
}

// The ETA counts the loop's own time between trials, not only the trials.
func TestLoopETACountsLoopOverhead(t *testing.T) {
	const trialDur, askDur = 10 * time.Second, 5 * time.Second
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	var l *Loop
	var eta time.Duration = -1
	r := &fakeRunner{eval: func(n, call int) (trial.Result, error) {
		if n == 3 {
			eta = l.status().ETA // two of four trials done
		}
		clock.Advance(trialDur)
		return linearEval(n, call)
	}}
	cfg := testConfig(t)
	cfg.MaxTrials, cfg.Repeats = 4, 1
	l = mustLoop(t, cfg, r, &slowAsk{newListProposer(1, 2, 3, 4), clock, askDur}, &memStore{})
	l.now = clock.Now
	if _, err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Two trials left at 15 s each (10 s trial + 5 s ask); the trials
	// alone would say 20 s.
	if want := 2 * (trialDur + askDur); eta != want {
		t.Fatalf("ETA %s with two trials left, want %s", eta, want)
	}
}
