package tuner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// TestRemeasureDefaultAlone: when vLLM's default is the only config
// measured or feasible, it is not re-measured against itself (issue 26:
// 9.5 of 14 minutes went to that), and the report says why.
func TestRemeasureDefaultAlone(t *testing.T) {
	for name, list := range map[string][]int{
		"only measured": {128},
		"only feasible": {128, 256, 512}, // tpot n/4 > 50 ms above 200
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.MaxTrials = len(list)
			r := &fakeRunner{eval: linearEval}
			rep, err := mustLoop(t, cfg, r, newListProposer(list...), &memStore{}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(r.calls) != len(list) || rep.RepeatTrials != 0 {
				t.Fatalf("runs %v, %d re-measurements; want the search only", r.calls, rep.RepeatTrials)
			}
			if !strings.Contains(rep.Remeasure, "only vLLM's default") || !rep.RecommendedIsDefault {
				t.Fatalf("note %q, default recommended %v", rep.Remeasure, rep.RecommendedIsDefault)
			}
		})
	}
}

// TestRemeasureBudget: on a fake clock with 10 s trials, the rounds are
// planned into the budget left in whole rounds: all when they fit, fewer
// when not, none (and a note) when fewer than 2 fit.
func TestRemeasureBudget(t *testing.T) {
	const trialDur = 10 * time.Second
	tests := []struct {
		budget time.Duration
		rounds int
		note   string
	}{
		// 3 search trials (30 s) then rounds of 3 configs (30 s each)
		// and the closing run of vLLM's default (10 s).
		{135 * time.Second, 3, ""},
		{105 * time.Second, 2, "cut to 2 of 3 rounds"},
		{95 * time.Second, 0, "skipped"},
	}
	for _, tt := range tests {
		t.Run(tt.budget.String(), func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1e9, 0)}
			cfg := testConfig(t)
			cfg.Budget = tt.budget
			l := mustLoop(t, cfg, &fakeRunner{eval: linearEval}, newListProposer(), &memStore{})
			l.now = clock.Now
			l.st = loopState{start: clock.Now(), known: map[string]bool{}}
			var trials []store.Trial
			for i, n := range []int{128, 192, 200} {
				tr := mkTrial(i, n, 0, result(trial.StatusOK, float64(n)*10, float64(n)/4, 70))
				tr.Started = clock.Now()
				clock.Advance(trialDur)
				tr.Ended = clock.Now()
				trials = append(trials, tr)
				l.st.durs, l.st.lastEnd = append(l.st.durs, trialDur), clock.Now()
			}
			p := l.planRounds(trials)
			if p.rounds != tt.rounds || len(p.ids) != 3 {
				t.Fatalf("%d rounds of %v, want %d of 3 configs", p.rounds, p.ids, tt.rounds)
			}
			if (tt.note == "") != (p.note == "") || !strings.Contains(p.note, tt.note) {
				t.Fatalf("note %q, want %q", p.note, tt.note)
			}
			if used := 30*time.Second + time.Duration(3*p.rounds+min(p.rounds, 1))*trialDur; used > tt.budget {
				t.Fatalf("plan needs %s of a %s budget", used, tt.budget)
			}
		})
	}
}

// TestRemeasureBudgetRun: a whole run on a fake clock stays within its
// budget, re-measurement included, and re-measures in whole rounds.
func TestRemeasureBudgetRun(t *testing.T) {
	const trialDur = 10 * time.Second
	for _, budget := range []time.Duration{75 * time.Second, 130 * time.Second, 200 * time.Second} {
		clock := &fakeClock{t: time.Unix(1e9, 0)}
		r := &fakeRunner{eval: func(n, call int) (trial.Result, error) {
			clock.Advance(trialDur)
			return linearEval(n, call)
		}}
		cfg := testConfig(t)
		cfg.MaxTrials, cfg.Budget = 10, budget
		l := mustLoop(t, cfg, r, newListProposer(128, 192, 200, 64, 32, 96), &memStore{})
		l.now = clock.Now
		rep, err := l.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if rep.Elapsed > budget {
			t.Fatalf("budget %s: ran %s", budget, rep.Elapsed)
		}
		// Whole rounds of every config and the default's closing run.
		if n := rep.RepeatTrials - 1; rep.RepeatTrials > 0 && (n%len(rep.Finalists) != 0 || n/len(rep.Finalists) < 2) {
			t.Fatalf("budget %s: %d re-measurements of %d configs", budget, rep.RepeatTrials, len(rep.Finalists))
		}
		if rep.RepeatTrials == 0 && rep.Remeasure == "" {
			t.Fatalf("budget %s: no re-measurement and no note", budget)
		}
	}
}
