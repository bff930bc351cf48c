package eval

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/chart"
)

// TestWriteSVG: the HV-ratio chart has one legend entry per strategy (the
// IQR lines unnamed) and the threshold, each sample in its line's colour;
// a scenario without summaries is an error.
func TestWriteSVG(t *testing.T) {
	r := &Report{Settings: Settings{Trials: 4}, Summaries: []Summary{
		{Scenario: "s", Strategy: "tuner", Curve: []float64{0.5, 0.8, 0.9, 0.97}, CurveQ1: []float64{0.4, 0.7, 0.85, 0.95}, CurveQ3: []float64{0.6, 0.9, 0.95, 0.99}},
		{Scenario: "s", Strategy: "random", Curve: []float64{0.3, 0.5, 0.6, 0.7}, CurveQ1: []float64{0.2, 0.4, 0.5, 0.6}, CurveQ3: []float64{0.4, 0.6, 0.7, 0.8}},
		{Scenario: "other", Strategy: "tuner", Curve: []float64{0.1, 0.2, 0.3, 0.4}},
	}}
	var b bytes.Buffer
	if err := r.WriteSVG(&b, "s"); err != nil {
		t.Fatal(err)
	}
	legend, err := chart.SVGLegend(&b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i, e := range legend {
		names = append(names, e.Name)
		if i < 2 && (len(e.Colours) == 0 || e.Colours[0] != chart.Hex(chart.Cycle(i))) {
			t.Errorf("%s: sample %v", e.Name, e.Colours)
		}
	}
	if got := strings.Join(names, ","); got != "tuner,random,threshold 0.95" {
		t.Errorf("legend %s", got)
	}
	if err := r.WriteSVG(&b, "none"); err == nil {
		t.Error("a scenario without summaries drawn")
	}
}
