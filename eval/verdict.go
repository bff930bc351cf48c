package eval

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/vllm-tuner/tuner/tuner"
)

// VerdictCondition is one row of the verdict evaluation: a simulated host
// on which every tuning flag is ignored, and every non-default config runs
// Speedup faster (1: no config can beat vLLM's default, every "significant
// gain" is false).
type VerdictCondition struct {
	Name    string  `json:"name"`
	Speedup float64 `json:"speedup"`
}

// VerdictSearch runs one search on the simulated host of cond with seed
// and returns its report.
type VerdictSearch func(ctx context.Context, cond VerdictCondition, seed uint64) (tuner.Report, error)

// VerdictEvalConfig configures MeasureVerdicts.
type VerdictEvalConfig struct {
	Conditions []VerdictCondition
	Seeds      int
	Search     VerdictSearch
	Progress   io.Writer // one line per search; nil = none
}

// VerdictRow is what the searches of one condition concluded.
type VerdictRow struct {
	VerdictCondition
	Searches int `json:"searches"`
	// Significant counts the "significant gain" verdicts (false ones when
	// Speedup is 1); KeptDefault those that kept vLLM's default.
	Significant int `json:"significant"`
	KeptDefault int `json:"kept_default"`
	// Gains are the best measured config's gains over vLLM's default, in
	// percent, with their intervals' bounds, seed by seed.
	Gains []VerdictGain `json:"gains"`
}

// VerdictGain is one search's verdict; the gain is that of the best
// measured config over vLLM's default (absent when the default ranked
// best).
type VerdictGain struct {
	Seed        uint64  `json:"seed"`
	HasGain     bool    `json:"has_gain"`
	Pct         float64 `json:"pct"`
	LowPct      float64 `json:"low_pct"`
	HighPct     float64 `json:"high_pct"`
	Significant bool    `json:"significant"`
	Verdict     string  `json:"verdict"`
}

// VerdictEval is the report of MeasureVerdicts.
type VerdictEval struct {
	Rows []VerdictRow `json:"rows"`
}

// MeasureVerdicts runs Seeds searches per condition and counts their
// verdicts: on a host that ignores every flag the goal is no "significant
// gain" at all; with a real gain, how often it is found.
func MeasureVerdicts(ctx context.Context, cfg VerdictEvalConfig) (*VerdictEval, error) {
	if cfg.Seeds < 1 || cfg.Search == nil || len(cfg.Conditions) == 0 {
		return nil, fmt.Errorf("eval verdict: want seeds, conditions and a search")
	}
	rep := &VerdictEval{}
	for _, cond := range cfg.Conditions {
		row := VerdictRow{VerdictCondition: cond}
		for seed := uint64(1); seed <= uint64(cfg.Seeds); seed++ {
			r, err := cfg.Search(ctx, cond, seed)
			if err != nil {
				return rep, fmt.Errorf("%s, seed %d: %w", cond.Name, seed, err)
			}
			row.Searches++
			g := VerdictGain{Seed: seed, Verdict: r.Verdict}
			if r.Gain != nil {
				g.HasGain = true
				g.Pct, g.LowPct, g.HighPct, g.Significant = r.Gain.Pct, r.Gain.LowPct, r.Gain.HighPct, r.Gain.Significant
			}
			if g.Significant && !r.RecommendedIsDefault {
				row.Significant++
			}
			if r.RecommendedIsDefault {
				row.KeptDefault++
			}
			row.Gains = append(row.Gains, g)
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "%s seed %d: %s\n", cond.Name, seed, r.Verdict)
			}
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// WriteVerdictEval writes the report as a Markdown table.
func WriteVerdictEval(w io.Writer, rep *VerdictEval) error {
	var b strings.Builder
	b.WriteString("| host | searches | \"significant gain\" | vLLM's default kept | gain of the best measured config (when not the default), min / median / max |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, r := range rep.Rows {
		var pcts []float64
		for _, g := range r.Gains {
			if g.HasGain {
				pcts = append(pcts, g.Pct)
			}
		}
		span := "-"
		if len(pcts) > 0 {
			slices.Sort(pcts)
			span = fmt.Sprintf("%+.1f%% / %+.1f%% / %+.1f%%", pcts[0], quantile(pcts, 0.5), pcts[len(pcts)-1])
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s |\n", r.Name, r.Searches, r.Significant, r.KeptDefault, span)
	}
	for _, r := range rep.Rows {
		fmt.Fprintf(&b, "\n%s:\n", r.Name)
		for _, g := range r.Gains {
			fmt.Fprintf(&b, "- seed %d: %s\n", g.Seed, g.Verdict)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
