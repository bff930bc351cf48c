package tuner

import (
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// TestAggregateHonestVerdicts: a config whose runs fail 20% of their
// requests does not meet even an empty SLO, an overloaded run makes its
// config infeasible whatever its latencies, and a recommended config with
// failed requests or short outputs carries warnings.
func TestAggregateHonestVerdicts(t *testing.T) {
	with := func(r trial.Result, f func(m *trial.Metrics)) trial.Result {
		m := r.Levels[0].Metrics
		f(&m)
		r.Levels = []trial.Level{{Metrics: m}}
		return r
	}
	failing := with(result(trial.StatusOK, 2000, 10, 70), func(m *trial.Metrics) {
		m.Completed, m.Failed, m.ErrorRate = 80, 20, 0.2
	})
	overloaded := with(result(trial.StatusUnstable, 1900, 5, 70), func(m *trial.Metrics) {
		m.Overloaded, m.OfferedRate, m.AchievedRate = true, 8, 3.9
	})
	short := with(result(trial.StatusOK, 1000, 40, 70), func(m *trial.Metrics) {
		m.Completed, m.Failed, m.ErrorRate, m.TokenMismatches = 995, 5, 0.005, 12
	})
	trials := []store.Trial{
		mkTrial(0, 1, 0, failing),
		mkTrial(1, 2, 0, overloaded),
		mkTrial(2, 3, 0, short),
	}
	cands := Aggregate(trials, nil, DefaultMetrics(), 1)
	if cands[0].Feasible || !strings.Contains(strings.Join(cands[0].Violations, ";"), "error_rate") {
		t.Errorf("20%% failed requests: feasible %v, violations %v", cands[0].Feasible, cands[0].Violations)
	}
	if cands[1].Feasible || cands[1].Overloaded != 1 || !strings.Contains(strings.Join(cands[1].Violations, ";"), "overloaded") {
		t.Errorf("overloaded: feasible %v, violations %v", cands[1].Feasible, cands[1].Violations)
	}
	best, err := Recommend(cands, DefaultMetrics(), nil, PreferLatency)
	if err != nil || best.ConfigID != cands[2].ConfigID {
		t.Fatalf("recommended %v (%v), want the only honest config", best, err)
	}
	w := strings.Join(best.Warnings(), "; ")
	if !strings.Contains(w, "5 of 1000 measured requests failed") || !strings.Contains(w, "12 requests returned fewer output tokens") {
		t.Errorf("warnings %q", w)
	}
	if len(cands[1].Warnings()) != 0 {
		t.Errorf("clean runs warn: %v", cands[1].Warnings())
	}
}

// TestJudge: one verdict for every door. A config is recommended over
// vLLM's default only with a significant paired gain; otherwise the
// default is, and the faster-looking config is BestMeasured; a default
// that misses the SLOs is never recommended.
func TestJudge(t *testing.T) {
	def := *rounds("def", 1000, 1100, 900)
	noisy := *rounds("a", 1030, 1090, 930)  // +3%, -1%, +3%
	steady := *rounds("b", 1080, 1188, 972) // +8% in every round
	m := DefaultMetrics()
	t.Run("no significant gain", func(t *testing.T) {
		v := Judge(JudgeInput{Cands: []Candidate{def, noisy}, DefaultID: "def", Metrics: m})
		if v.Pick.ConfigID != "def" || !v.IsDefault || v.BestMeasured == nil || v.BestMeasured.ConfigID != "a" || v.Gain == nil || v.Gain.Significant {
			t.Fatalf("verdict %+v", v)
		}
		if !strings.HasPrefix(v.Text, "keep vLLM's default: the best measured config a is +") || !strings.HasSuffix(v.Text, ": no significant gain") {
			t.Fatalf("text %q", v.Text)
		}
	})
	t.Run("significant gain", func(t *testing.T) {
		v := Judge(JudgeInput{Cands: []Candidate{def, noisy, steady}, DefaultID: "def", Metrics: m})
		if v.Pick.ConfigID != "b" || v.IsDefault || v.BestMeasured != nil || !v.Gain.Significant || v.Gain.Compared != 2 {
			t.Fatalf("verdict %+v gain %+v", v, v.Gain)
		}
		if !strings.HasPrefix(v.Text, "config b: +") || !strings.HasSuffix(v.Text, "over vLLM's default: significant gain") {
			t.Fatalf("text %q", v.Text)
		}
	})
	t.Run("default misses the SLOs", func(t *testing.T) {
		bad := def
		bad.Feasible, bad.Violations = false, []string{"tpot_p99=60 ms (want <= 50 ms)"}
		v := Judge(JudgeInput{Cands: []Candidate{bad, noisy}, DefaultID: "def", Metrics: m})
		if v.Pick.ConfigID != "a" || v.IsDefault || !strings.Contains(v.Text, "vLLM's default misses the SLOs (tpot_p99") {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("default ranks best", func(t *testing.T) {
		slow := *rounds("c", 900, 990, 810)
		v := Judge(JudgeInput{Cands: []Candidate{def, slow}, DefaultID: "def", Metrics: m})
		if v.Pick.ConfigID != "def" || !v.IsDefault || v.BestMeasured != nil || v.Gain != nil {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("default failed", func(t *testing.T) {
		// Mixtral on one GPU: vLLM's default ran and ran out of memory; the
		// verdict says so, not that it was never measured.
		oom := Candidate{ConfigID: "def", Failed: 1, Failure: trial.FailOOM, Violations: []string{"no usable measurement"}}
		v := Judge(JudgeInput{Cands: []Candidate{oom, noisy}, DefaultID: "def", Metrics: m})
		if v.Pick.ConfigID != "a" || v.IsDefault || v.Default != nil || v.Gain != nil ||
			v.Text != "config a: vLLM's default failed to start (out of memory), so no gain over it is known" {
			t.Fatalf("verdict %+v", v)
		}
		crashed := oom
		crashed.Failure = trial.FailCrashed
		if v := Judge(JudgeInput{Cands: []Candidate{crashed, noisy}, DefaultID: "def", Metrics: m}); v.Text != "config a: vLLM's default failed (crashed), so no gain over it is known" {
			t.Fatalf("verdict of a crashed default %q", v.Text)
		}
		if v := Judge(JudgeInput{Cands: []Candidate{noisy}, DefaultID: "def", Metrics: m}); v.Text != "config a: vLLM's default was not measured, so no gain over it is known" {
			t.Fatalf("verdict without the default %q", v.Text)
		}
	})
	t.Run("nothing feasible", func(t *testing.T) {
		bad := noisy
		bad.Feasible = false
		v := Judge(JudgeInput{Cands: []Candidate{bad}, DefaultID: "def", Metrics: m})
		if v.Pick != nil || v.Err == nil || v.Text != v.Err.Error() {
			t.Fatalf("verdict %+v", v)
		}
	})
}
