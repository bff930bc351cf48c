package tuner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// screenEval: throughput and TPOT by max_num_seqs; every run pays 10 s of
// start-up and 0.1 s per measured request.
var screenEval = map[int][2]float64{
	128: {1280, 32}, // vLLM's default: measured in full
	300: {3000, 75}, // misses tpot_p99<=50ms by more than 10%
	200: {2000, 40}, // promising: promoted
	96:  {900, 45},  // dominated by 200's short run by more than 10%
	64:  {640, 16},  // promising: promoted
}

// workRunner runs a config on a workload; with staged it re-uses the
// engine for a promotion (StagedRunner).
type workRunner struct {
	mu    sync.Mutex
	calls []string // "n/requests" of every run, in order
}

func (r *workRunner) Run(ctx context.Context, cfg spaces.Config, w trial.Workload) (trial.Result, error) {
	n := cfg.Int("max_num_seqs")
	r.mu.Lock()
	r.calls = append(r.calls, fmt.Sprintf("%d/%d", n, w.NumRequests))
	r.mu.Unlock()
	v := screenEval[n]
	res := result(trial.StatusOK, v[0], v[1], 70)
	res.Config = cfg
	res.Phases = trial.Phases{StartupS: 10, MeasureS: 0.1 * float64(w.NumRequests)}
	res.Phases.TotalS = res.Phases.StartupS + res.Phases.MeasureS
	return res, ctx.Err()
}

// stagedRunner is workRunner with the engine kept up for a promotion.
type stagedRunner struct{ workRunner }

var _ StagedRunner = (*stagedRunner)(nil)

func (r *stagedRunner) RunStaged(ctx context.Context, cfg spaces.Config, short, full trial.Workload, promote func(*trial.Result) bool) (trial.Result, trial.Result, error) {
	first, err := r.Run(ctx, cfg, short)
	if err != nil || !first.Usable() || !promote(&first) {
		return first, trial.Result{}, err
	}
	second, err := r.Run(ctx, cfg, full)
	second.Phases.TotalS -= second.Phases.StartupS
	second.Phases.StartupS = 0
	return first, second, err
}

// recProposer is a listProposer that keeps what it was told.
type recProposer struct {
	*listProposer
	mu   sync.Mutex
	seen map[int]*trial.Result
}

func (p *recProposer) Tell(cfg spaces.Config, res *trial.Result) {
	p.listProposer.Tell(cfg, res)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[cfg.Int("max_num_seqs")] = res
}

func screenConfig(t *testing.T, trials int) Config {
	c := testConfig(t)
	c.Workload = trial.Workload{Name: "w", NumRequests: 100, Warmup: 10}
	c.MaxTrials, c.Finalists, c.Repeats = trials, 0, 1
	c.Screen = Screening{Fraction: 0.25, Calibrate: -1}
	return c
}

func TestLoopScreening(t *testing.T) {
	for _, staged := range []bool{false, true} {
		t.Run(map[bool]string{false: "two engine starts", true: "engine re-used"}[staged], func(t *testing.T) {
			var r Runner
			wr := &workRunner{}
			r = wr
			if staged {
				sr := &stagedRunner{}
				r, wr = sr, &sr.workRunner
			}
			p := &recProposer{listProposer: newListProposer(128, 300, 200, 96, 64), seen: map[int]*trial.Result{}}
			st := &memStore{}
			l, err := New(screenConfig(t, 5), r, p, st)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := l.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Join(wr.calls, " "), "128/100 300/25 200/25 200/100 96/25 64/25 64/100"; got != want {
				t.Fatalf("runs %s, want %s (default in full, short runs first, promotions in full)", got, want)
			}
			if rep.SearchTrials != 5 || rep.ScreenedOut != 2 || rep.FailedTrials != 0 {
				t.Fatalf("report: %d search trials, %d screened out, %d failed; want 5, 2, 0", rep.SearchTrials, rep.ScreenedOut, rep.FailedTrials)
			}
			for _, c := range rep.Front {
				if n := c.Config.Int("max_num_seqs"); n == 300 || n == 96 {
					t.Fatalf("screened-out config %d in the front", n)
				}
			}
			// Not re-measured: vLLM's default is kept, 200 the best measured.
			if !rep.RecommendedIsDefault || rep.BestMeasured == nil || rep.BestMeasured.Config.Int("max_num_seqs") != 200 {
				t.Fatalf("best measured %+v, want 200 (default kept: %v)", rep.BestMeasured, rep.RecommendedIsDefault)
			}
			trials, _ := st.Trials(context.Background())
			byN := map[int]store.Trial{}
			for _, tr := range trials {
				byN[tr.Config.Int("max_num_seqs")] = tr
			}
			if s := byN[128].Result.Screen; s != nil {
				t.Fatalf("vLLM's default was screened: %+v", s)
			}
			for n, want := range map[int]string{300: "misses the SLO", 96: "dominated"} {
				tr := byN[n]
				s := tr.Result.Screen
				if tr.State != store.StateFailed || tr.Result.Failure != trial.FailScreenedOut || s == nil || s.Promoted || !strings.Contains(s.Reason, want) {
					t.Fatalf("config %d: state %s, failure %s, screen %+v; want screened out, %q", n, tr.State, tr.Result.Failure, s, want)
				}
				if s.Fraction != 0.25 || s.Metrics == nil || tr.Result.Levels != nil {
					t.Fatalf("config %d: short run not kept apart from the result: %+v", n, tr.Result)
				}
				// The proposer learns the short run's figures, not a failure.
				if told := p.seen[n]; told == nil || !told.Usable() || told.Metrics().OutputThroughput != screenEval[n][0] {
					t.Fatalf("config %d: proposer was told %+v, want the short run's measurement", n, told)
				}
			}
			// A promotion's phases count both stages; a re-used engine
			// starts once.
			startup := 20.0
			if staged {
				startup = 10
			}
			for _, n := range []int{200, 64} {
				res := byN[n].Result
				if res.Screen == nil || !res.Screen.Promoted || res.Phases.StartupS != startup || res.Phases.MeasureS != 12.5 {
					t.Fatalf("config %d: screen %+v, phases %+v; want promoted, startup %.0f s, measure 12.5 s", n, res.Screen, res.Phases, startup)
				}
			}
		})
	}
}

func TestLoopScreeningResumes(t *testing.T) {
	st := &memStore{}
	r := &stagedRunner{}
	l, err := New(screenConfig(t, 3), r, newListProposer(128, 300, 200, 96, 64), st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A crash during the next promotion's full run: the record stays
	// running, the store marks it interrupted on open.
	if _, err := st.Begin(context.Background(), store.Trial{State: store.StateRunning, Config: cfgN(64), ConfigID: cfgN(64).ID()}); err != nil {
		t.Fatal(err)
	}
	st.markInterrupted()
	r.calls = nil
	cfg := screenConfig(t, 5)
	cfg.Resume = true
	l, err = New(cfg, r, newListProposer(128, 300, 200, 96, 64), st)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 64 is re-run (screened again), then 96 is screened out against the
	// stored short run of 200; nothing finished runs again.
	if got, want := strings.Join(r.calls, " "), "64/25 64/100 96/25"; got != want {
		t.Fatalf("resumed runs %s, want %s", got, want)
	}
	if rep.SearchTrials != 5 || rep.ScreenedOut != 2 {
		t.Fatalf("resumed report: %d search trials, %d screened out; want 5, 2", rep.SearchTrials, rep.ScreenedOut)
	}
}

// The first Calibrate short runs are promoted whatever they read; later
// ones are corrected by the promoted pairs' full/short ratios.
func TestLoopScreeningCalibrates(t *testing.T) {
	r := &stagedRunner{}
	cfg := screenConfig(t, 5)
	cfg.Screen.Calibrate = 1
	l, err := New(cfg, r, newListProposer(128, 300, 200, 96, 64), &memStore{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(r.calls, " "), "128/100 300/25 300/100 200/25 200/100 96/25 64/25 64/100"; got != want {
		t.Fatalf("runs %s, want %s (300 promoted to calibrate)", got, want)
	}
	if rep.ScreenedOut != 1 {
		t.Fatalf("%d screened out, want 1 (96)", rep.ScreenedOut)
	}
}

func TestScreeningValidate(t *testing.T) {
	for _, s := range []Screening{{Fraction: -0.1}, {Fraction: 1}, {Fraction: 0.2, Keep: 1.5}, {Fraction: 0.2, Margin: 2}} {
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "screen") {
			t.Errorf("%+v: error %v, want one naming the flag", s, err)
		}
	}
	for _, s := range []Screening{{}, {Fraction: 0.25}, {Fraction: 0.5, Keep: 1, Margin: -1}} {
		if err := s.Validate(); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}
