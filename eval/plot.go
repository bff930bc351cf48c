package eval

import (
	"fmt"
	"io"

	"github.com/vllm-tuner/tuner/chart"
)

// WriteSVG draws the median HV ratio against trials of every strategy on a
// scenario (the IQR as thin dashed lines, the threshold as a dashed rule).
func (r *Report) WriteSVG(w io.Writer, scenario string) error { return r.writePlot(w, scenario, "svg") }

// writePlot draws the chart in a chart format ("svg", "png" or "html").
func (r *Report) writePlot(w io.Writer, scenario, format string) error {
	p := chart.Panel{X: chart.Axis{Name: "search trials", Min: 1, Max: float64(r.Settings.Trials)},
		Y:     chart.Axis{Name: "hypervolume ratio (found / true)", Min: 0, Max: 1.02},
		Rules: []chart.Rule{{Name: fmt.Sprintf("threshold %g", Threshold), Value: Threshold, Colour: chart.Grey}}}
	n := 0
	for _, s := range r.Summaries {
		if s.Scenario != scenario {
			continue
		}
		col := chart.Cycle(n)
		n++
		line := func(name string, ys []float64, width float64, dashed, hidden bool) chart.Series {
			out := chart.Series{Name: name, Kind: chart.Line, Colour: col, Width: width, Dashed: dashed, NoLegend: hidden}
			for i, y := range ys {
				out.Points = append(out.Points, chart.Point{X: float64(i + 1), Y: y, Tip: fmt.Sprintf("%s, trial %d: %.3f", name, i+1, y)})
			}
			return out
		}
		p.Series = append(p.Series, line(s.Strategy, s.Curve, 1.6, false, false),
			line(s.Strategy+" Q1", s.CurveQ1, 0.5, true, true), line(s.Strategy+" Q3", s.CurveQ3, 0.5, true, true))
	}
	if n == 0 {
		return fmt.Errorf("eval: no summaries for scenario %q", scenario)
	}
	return chart.Render(w, chart.Figure{Title: "HV ratio vs trials: " + scenario, Page: "HV ratio vs trials", Panels: []chart.Panel{p}}, format)
}
