package eval

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/tuner"
)

// TestMeasureVerdicts: a significant gain that kept vLLM's default is no
// "significant gain" verdict; the table counts per condition and leaves
// out the gain of searches whose default ranked best.
func TestMeasureVerdicts(t *testing.T) {
	search := func(_ context.Context, cond VerdictCondition, seed uint64) (tuner.Report, error) {
		switch {
		case cond.Speedup == 1 && seed == 1:
			return tuner.Report{RecommendedIsDefault: true, Verdict: "keep vLLM's default: it ranks best"}, nil
		case cond.Speedup == 1:
			return tuner.Report{RecommendedIsDefault: true, Gain: &tuner.GainEstimate{Pct: 2, LowPct: -1, HighPct: 5}, Verdict: "keep"}, nil
		case seed == 1:
			return tuner.Report{Gain: &tuner.GainEstimate{Pct: 5, LowPct: 3, HighPct: 7, Significant: true}, Verdict: "config x: significant gain"}, nil
		}
		return tuner.Report{RecommendedIsDefault: true, Gain: &tuner.GainEstimate{Pct: 4, LowPct: -1, HighPct: 9}, Verdict: "keep"}, nil
	}
	rep, err := MeasureVerdicts(context.Background(), VerdictEvalConfig{
		Conditions: []VerdictCondition{{Name: "flags ignored", Speedup: 1}, {Name: "5% faster", Speedup: 1.05}}, Seeds: 2, Search: search})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Rows[0]; r.Searches != 2 || r.Significant != 0 || r.KeptDefault != 2 {
		t.Fatalf("flags ignored: %+v", r)
	}
	if r := rep.Rows[1]; r.Searches != 2 || r.Significant != 1 || r.KeptDefault != 1 {
		t.Fatalf("5%% faster: %+v", r)
	}
	var b bytes.Buffer
	if err := WriteVerdictEval(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| flags ignored | 2 | 0 | 2 | +2.0% / +2.0% / +2.0% |", "| 5% faster | 2 | 1 | 1 | +4.0% / +4.5% / +5.0% |", "- seed 1: config x: significant gain"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
