package eval

import (
	"fmt"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteSVG draws the median HV ratio against trials of every strategy on a
// scenario (the IQR as thin dashed lines, the 0.95 threshold dotted) with
// gonum.org/v1/plot.
func (r *Report) WriteSVG(w io.Writer, scenario string) error { return r.writePlot(w, scenario, "svg") }

// writePlot draws the chart in a gonum/plot format ("svg", "png", ...).
func (r *Report) writePlot(w io.Writer, scenario, format string) error {
	p := plot.New()
	p.Title.Text = "HV ratio vs trials: " + scenario
	p.X.Label.Text = "search trials"
	p.Y.Label.Text = "hypervolume ratio (found / true)"
	p.Y.Min, p.Y.Max = 0, 1.02
	p.X.Min, p.X.Max = 1, float64(r.Settings.Trials)
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = false
	th, err := plotter.NewLine(plotter.XYs{{X: 1, Y: Threshold}, {X: float64(r.Settings.Trials), Y: Threshold}})
	if err != nil {
		return err
	}
	th.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
	p.Add(th)
	n := 0
	for _, s := range r.Summaries {
		if s.Scenario != scenario {
			continue
		}
		col := plotutil.Color(n)
		n++
		mk := func(ys []float64) plotter.XYs {
			pts := make(plotter.XYs, len(ys))
			for i, y := range ys {
				pts[i] = plotter.XY{X: float64(i + 1), Y: y}
			}
			return pts
		}
		med, err := plotter.NewLine(mk(s.Curve))
		if err != nil {
			return err
		}
		med.Color, med.Width = col, vg.Points(1.6)
		p.Add(med)
		p.Legend.Add(s.Strategy, med)
		for _, q := range [][]float64{s.CurveQ1, s.CurveQ3} {
			l, err := plotter.NewLine(mk(q))
			if err != nil {
				return err
			}
			l.Color, l.Width, l.Dashes = col, vg.Points(0.5), []vg.Length{vg.Points(3), vg.Points(2)}
			p.Add(l)
		}
	}
	if n == 0 {
		return fmt.Errorf("eval: no summaries for scenario %q", scenario)
	}
	c, err := p.WriterTo(7*vg.Inch, 4.5*vg.Inch, format)
	if err != nil {
		return err
	}
	_, err = c.WriteTo(w)
	return err
}
