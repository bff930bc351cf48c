package tuner

import (
	"errors"
	"fmt"
	"image/color"
	"io"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// HistorySeries is one benchmark cell's metric over runs.
type HistorySeries struct {
	Name   string
	Points []HistoryPoint
}

// HistoryPoint is the metric in one run (Run indexes HistoryOptions.Runs).
type HistoryPoint struct {
	Run   int
	Value float64
	// Change marks a change point against the previous run (the gate's
	// regression or improvement); Regression says which.
	Change, Regression bool
}

// HistoryOptions describe the history chart.
type HistoryOptions struct {
	Title  string
	Metric string   // y axis label, e.g. "tpot_p50 (ms)"
	Runs   []string // x tick labels in time order, e.g. "r3 0.10.1"
	Width  vg.Length
	Height vg.Length
}

// NewHistoryChart draws each series over the runs (x: run in time order)
// with a filled circle per run (SVGMarkers reads them back) and a red
// triangle (regression) or green one (improvement) on change points.
func NewHistoryChart(series []HistorySeries, o HistoryOptions) (*Chart, error) {
	var ys []float64
	for _, s := range series {
		for _, q := range s.Points {
			ys = append(ys, q.Value)
		}
	}
	if len(ys) == 0 {
		return nil, errors.New("history chart: nothing to plot")
	}
	o.Width, o.Height = chartSize(o.Width, o.Height, 4.5*vg.Inch)
	p := plot.New()
	p.Title.Text = o.Title
	p.X.Label.Text = "run (oldest first)"
	p.Y.Label.Text = o.Metric
	p.Add(plotter.NewGrid())
	p.X.Min, p.X.Max = -0.5, float64(len(o.Runs))-0.5
	p.Y.Min, p.Y.Max = paddedRange(ys)
	ticks := make([]plot.Tick, len(o.Runs))
	for i, r := range o.Runs {
		ticks[i] = plot.Tick{Value: float64(i), Label: r}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	var reg, imp plotter.XYs
	for i, s := range series {
		pts := make(plotter.XYs, len(s.Points))
		for j, q := range s.Points {
			pts[j] = plotter.XY{X: float64(q.Run), Y: q.Value}
			if q.Change && q.Regression {
				reg = append(reg, pts[j])
			} else if q.Change {
				imp = append(imp, pts[j])
			}
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("history chart: %w", err)
		}
		c := plotutil.Color(i)
		l.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1.5)}
		sc.GlyphStyle = draw.GlyphStyle{Shape: draw.CircleGlyph{}, Radius: vg.Points(3.5), Color: c}
		p.Add(l, sc)
		p.Legend.Add(s.Name, l)
	}
	for _, m := range []struct {
		pts   plotter.XYs
		name  string
		color color.Color
	}{{reg, "regression", color.RGBA{R: 210, A: 255}}, {imp, "improvement", color.RGBA{G: 150, A: 255}}} {
		if len(m.pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(m.pts)
		if err != nil {
			return nil, fmt.Errorf("history chart: %w", err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Shape: draw.PyramidGlyph{}, Radius: vg.Points(7), Color: m.color}
		p.Add(sc)
		p.Legend.Add(m.name, sc)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return &Chart{Plot: p, Width: o.Width, Height: o.Height}, nil
}

// WriteHistoryHTML writes the history as an interactive go-echarts page: a
// line per series over the runs, change points as mark points.
func WriteHistoryHTML(w io.Writer, series []HistorySeries, o HistoryOptions) error {
	n := 0
	for _, s := range series {
		n += len(s.Points)
	}
	if n == 0 {
		return errors.New("history chart: nothing to plot")
	}
	lc := charts.NewLine()
	lc.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{PageTitle: "tuner: benchmark history", Width: "1100px", Height: "650px"}),
		charts.WithTitleOpts(opts.Title{Title: o.Title}),
		charts.WithXAxisOpts(opts.XAxis{Name: "run", Type: "category"}),
		charts.WithYAxisOpts(opts.YAxis{Name: o.Metric, Type: "value", Scale: opts.Bool(true)}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Bottom: "0"}),
	)
	lc.SetXAxis(o.Runs)
	for _, s := range series {
		data := make([]opts.LineData, len(o.Runs))
		for i := range data {
			data[i] = opts.LineData{Value: "-"} // a run without this cell
		}
		var marks []opts.MarkPointNameCoordItem
		for _, q := range s.Points {
			data[q.Run] = opts.LineData{Value: q.Value, Symbol: "circle", SymbolSize: 8}
			if q.Change {
				name, col := "improvement", "green"
				if q.Regression {
					name, col = "regression", "red"
				}
				marks = append(marks, opts.MarkPointNameCoordItem{Name: name, Coordinate: []any{o.Runs[q.Run], q.Value},
					Label: &opts.Label{Show: opts.Bool(true), Formatter: name}, ItemStyle: &opts.ItemStyle{Color: col}})
			}
		}
		var so []charts.SeriesOpts
		for _, m := range marks {
			so = append(so, charts.WithMarkPointNameCoordItemOpts(m))
		}
		lc.AddSeries(s.Name, data, so...)
	}
	return lc.Render(w)
}
