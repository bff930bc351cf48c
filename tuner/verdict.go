package tuner

import (
	"fmt"
	"strings"

	"github.com/vllm-tuner/tuner/trial"
)

// JudgeInput is what a verdict is drawn from: the candidates of one or
// more studies of one setup (Aggregate) and which of them is vLLM's
// default.
type JudgeInput struct {
	Cands     []Candidate
	DefaultID string
	Metrics   Metrics
	SLO       trial.SLO
	Prefer    Prefer
}

// Verdict is the one judgement of a setup's measurements that every door
// shows: search's summary, `recommend` in each format, pareto, trials, the
// charts, the service's recommend endpoint and the web page.
type Verdict struct {
	// Pick is the config to run; nil when nothing meets the SLOs (Err).
	Pick *Candidate `json:"-"`
	// IsDefault says the pick is vLLM's default.
	IsDefault bool `json:"is_default"`
	// BestMeasured is the best-ranked config when the default is kept for
	// want of a significant gain: the one that looked faster.
	BestMeasured *Candidate `json:"best_measured,omitempty"`
	// Default is vLLM's default's measurement (nil when never measured).
	Default *Candidate `json:"-"`
	// Gain is that of the best-ranked config over the default (the pick's
	// or BestMeasured's); nil when there is none to judge.
	Gain *GainEstimate `json:"gain,omitempty"`
	// Text is the verdict in one line, word for word the same everywhere.
	Text string `json:"verdict"`
	// Err is the *InfeasibleError when nothing meets the SLOs.
	Err error `json:"-"`
}

// Judge draws the verdict: the best-ranked config (RecommendMeasured: the
// re-measured ones first) is recommended over vLLM's default only when its
// throughput gain over the default is significant (EstimateGains, judged
// together with every config compared with the default); otherwise the
// default is recommended and the faster-looking config is BestMeasured. A
// default that misses the SLOs is never recommended. With a preference
// other than throughput the pick is by that preference and the gain is
// shown, not required.
func Judge(in JudgeInput) Verdict {
	m := in.Metrics
	if m.Throughput == "" {
		m = DefaultMetrics()
	}
	best, err := RecommendMeasured(in.Cands, m, in.SLO, in.Prefer)
	if err != nil {
		return Verdict{Err: err, Text: err.Error()}
	}
	v := Verdict{Pick: best}
	var compared []*Candidate
	var failedDef *Candidate // the default, run but never measured
	for i := range in.Cands {
		c := &in.Cands[i]
		switch {
		case c.ConfigID == in.DefaultID && c.Throughput.N > 0:
			v.Default = c
		case c.ConfigID == in.DefaultID:
			failedDef = c
		case len(c.Rounds) > 0:
			compared = append(compared, c)
		}
	}
	def := v.Default
	switch {
	case def == nil && failedDef != nil && failedDef.Failed > 0:
		v.Text = fmt.Sprintf("config %s: vLLM's default %s, so no gain over it is known", best.ConfigID, failedHow(failedDef.Failure))
		return v
	case def == nil:
		v.Text = fmt.Sprintf("config %s: vLLM's default was not measured, so no gain over it is known", best.ConfigID)
		return v
	case !def.Feasible:
		v.Text = fmt.Sprintf("config %s: vLLM's default misses the SLOs (%s)", best.ConfigID, strings.Join(def.Violations, ", "))
		return v
	case best.ConfigID == def.ConfigID:
		v.IsDefault = true
		v.Text = fmt.Sprintf("keep vLLM's default: it ranks best of the measured configs that meet the SLOs (config %s)", def.ConfigID)
		return v
	}
	g := gainOf(best, def, compared)
	v.Gain = &g
	gain := fmt.Sprintf("%s %s over vLLM's default", g, m.Throughput)
	switch {
	case g.Significant:
		v.Text = fmt.Sprintf("config %s: %s: significant gain", best.ConfigID, gain)
	case in.Prefer != "" && in.Prefer != PreferThroughput:
		v.Text = fmt.Sprintf("config %s (--prefer %s): %s: %s", best.ConfigID, in.Prefer, gain, g.Verdict())
	default:
		v.Pick, v.IsDefault, v.BestMeasured = def, true, best
		v.Text = fmt.Sprintf("keep vLLM's default: the best measured config %s is %s: %s", best.ConfigID, gain, g.Verdict())
	}
	return v
}

// failedHow says how a config's trial failed, for a verdict: the classes
// of an engine that never served (it did not start) named as such.
func failedHow(f trial.FailureClass) string {
	switch f {
	case trial.FailOOM:
		return "failed to start (out of memory)"
	case trial.FailKVTooSmall:
		return "failed to start (its KV cache cannot hold one request of max_model_len)"
	case trial.FailInvalidArgument:
		return "failed to start (vLLM refused its arguments)"
	case trial.FailStartupTimeout:
		return "failed to start (not healthy before the startup timeout)"
	case "":
		return "failed"
	}
	return "failed (" + string(f) + ")"
}

// gainOf is c's gain over def judged together with the compared configs
// (c among them when it was re-measured).
func gainOf(c, def *Candidate, compared []*Candidate) GainEstimate {
	all := compared
	i := -1
	for j, x := range compared {
		if x.ConfigID == c.ConfigID {
			i = j
		}
	}
	if i < 0 {
		all, i = append(append([]*Candidate(nil), compared...), c), len(compared)
	}
	gs, _ := EstimateGains(all, def)
	return gs[i]
}

// Recommended is the verdict's pick as Recommend returns it: the
// *InfeasibleError when nothing meets the SLOs.
func (v Verdict) Recommended() (*Candidate, error) {
	return v.Pick, v.Err
}
