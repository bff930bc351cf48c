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
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/vllm-tuner/tuner/trial"
)

// TraceSeries is one feedback-load run over time: the offered rate and
// the held tail per window.
type TraceSeries struct {
	Name      string
	Metric    string  // e.g. ttft_p95
	Target    float64 // its bound (ms)
	Sustained float64 // req/s
	Windows   []trial.FeedbackWindow
}

// TraceOf is the series of a feedback outcome.
func TraceOf(name string, fb *trial.Feedback) TraceSeries {
	return TraceSeries{Name: name, Metric: fb.Metric, Target: fb.Target, Sustained: fb.Sustained, Windows: fb.Windows}
}

// TraceOptions describe the trace chart.
type TraceOptions struct {
	Title  string
	Width  vg.Length // 0: 7 in
	Height vg.Length // 0: 6 in (two panels)
}

// TraceChart is the feedback trace: offered rate over time (top, with the
// sustained load dashed) and the held tail over time (bottom, with the
// target dashed), windows meeting the SLO as filled circles, missing it
// as crosses.
type TraceChart struct {
	Rate, Tail    *plot.Plot
	Width, Height vg.Length
}

// NewTraceChart draws the trace of each series.
func NewTraceChart(series []TraceSeries, o TraceOptions) (*TraceChart, error) {
	n := 0
	for _, s := range series {
		n += len(s.Windows)
	}
	if n == 0 {
		return nil, errors.New("trace chart: nothing to plot")
	}
	o.Width, o.Height = chartSize(o.Width, o.Height, 6*vg.Inch)
	rate, tail := plot.New(), plot.New()
	rate.Title.Text = o.Title
	rate.Y.Label.Text = "offered load (req/s)"
	tail.X.Label.Text = "time (s)"
	rate.Add(plotter.NewGrid())
	tail.Add(plotter.NewGrid())
	dashed := func(p *plot.Plot, y, x0, x1 float64, c color.Color, label string) error {
		l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}})
		if err != nil {
			return err
		}
		l.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
		p.Add(l)
		p.Legend.Add(label, l)
		return nil
	}
	for i, s := range series {
		if len(s.Windows) == 0 {
			continue
		}
		c := plotutil.Color(i)
		var rp, tp, ok, miss plotter.XYs
		end := 0.0
		for _, w := range s.Windows {
			mid := w.StartS + w.Seconds/2
			rp = append(rp, plotter.XY{X: mid, Y: w.Rate})
			tp = append(tp, plotter.XY{X: mid, Y: w.Tail})
			if w.Met {
				ok = append(ok, plotter.XY{X: mid, Y: w.Tail})
			} else {
				miss = append(miss, plotter.XY{X: mid, Y: w.Tail})
			}
			end = w.StartS + w.Seconds
		}
		for _, pl := range []struct {
			p   *plot.Plot
			pts plotter.XYs
		}{{rate, rp}, {tail, tp}} {
			l, err := plotter.NewLine(pl.pts)
			if err != nil {
				return nil, fmt.Errorf("trace chart: %w", err)
			}
			l.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1.5)}
			pl.p.Add(l)
			if pl.p == rate {
				pl.p.Legend.Add(s.Name, l)
			}
		}
		for _, m := range []struct {
			pts   plotter.XYs
			shape draw.GlyphDrawer
		}{{ok, draw.CircleGlyph{}}, {miss, draw.CrossGlyph{}}} {
			if len(m.pts) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(m.pts)
			if err != nil {
				return nil, fmt.Errorf("trace chart: %w", err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Shape: m.shape, Radius: vg.Points(3), Color: c}
			tail.Add(sc)
		}
		if s.Sustained > 0 {
			if err := dashed(rate, s.Sustained, 0, end, c, fmt.Sprintf("%s sustained %.3g req/s", s.Name, s.Sustained)); err != nil {
				return nil, fmt.Errorf("trace chart: %w", err)
			}
		}
		if i == 0 {
			tail.Y.Label.Text = s.Metric + " (ms)"
			if err := dashed(tail, s.Target, 0, end, color.RGBA{R: 200, A: 255}, fmt.Sprintf("target %s <= %g ms", s.Metric, s.Target)); err != nil {
				return nil, fmt.Errorf("trace chart: %w", err)
			}
		}
	}
	for _, p := range []*plot.Plot{rate, tail} {
		p.Y.Min = 0
		p.X.Min = 0
		p.Legend.Top = true
		p.Legend.Left = true
	}
	return &TraceChart{Rate: rate, Tail: tail, Width: o.Width, Height: o.Height}, nil
}

// Write renders both panels, one above the other, as "svg" or "png".
func (c *TraceChart) Write(w io.Writer, format string) error {
	var cv draw.Canvas
	var wt io.WriterTo
	switch format {
	case "svg":
		s := vgsvg.New(c.Width, c.Height)
		cv, wt = draw.New(s), s
	case "png":
		img := vgimg.New(c.Width, c.Height)
		cv, wt = draw.New(img), vgimg.PngCanvas{Canvas: img}
	default:
		return fmt.Errorf("trace chart: format %q (want svg or png)", format)
	}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(8)}
	cells := plot.Align([][]*plot.Plot{{c.Rate}, {c.Tail}}, tiles, cv)
	c.Rate.Draw(cells[0][0])
	c.Tail.Draw(cells[1][0])
	_, err := wt.WriteTo(w)
	return err
}

// WriteTraceHTML writes the trace as an interactive go-echarts page: the
// offered rate (left axis) and the held tail (right axis) over time.
func WriteTraceHTML(w io.Writer, series []TraceSeries, o TraceOptions) error {
	n := 0
	for _, s := range series {
		n += len(s.Windows)
	}
	if n == 0 {
		return errors.New("trace chart: nothing to plot")
	}
	lc := charts.NewLine()
	metric := series[0].Metric
	lc.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{PageTitle: "tuner: feedback load", Width: "1100px", Height: "650px"}),
		charts.WithTitleOpts(opts.Title{Title: o.Title, Subtitle: "offered load (left) and " + metric + " (right) per window"}),
		charts.WithXAxisOpts(opts.XAxis{Name: "s", Type: "value"}),
		charts.WithYAxisOpts(opts.YAxis{Name: "req/s", Type: "value"}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Bottom: "0"}),
	)
	lc.ExtendYAxis(opts.YAxis{Name: metric + " (ms)", Type: "value"})
	for _, s := range series {
		rate := make([]opts.LineData, len(s.Windows))
		tail := make([]opts.LineData, len(s.Windows))
		for j, win := range s.Windows {
			mid := win.StartS + win.Seconds/2
			rate[j] = opts.LineData{Value: []float64{mid, win.Rate}, Symbol: "circle", SymbolSize: 6}
			sym := "circle"
			if !win.Met {
				sym = "triangle"
			}
			tail[j] = opts.LineData{Value: []float64{mid, win.Tail}, Symbol: sym, SymbolSize: 8}
		}
		lc.AddSeries(s.Name+" req/s", rate,
			charts.WithMarkLineNameYAxisItemOpts(opts.MarkLineNameYAxisItem{Name: fmt.Sprintf("sustained %.3g req/s", s.Sustained), YAxis: s.Sustained}))
		lc.AddSeries(s.Name+" "+s.Metric, tail, charts.WithLineChartOpts(opts.LineChart{YAxisIndex: 1}),
			charts.WithMarkLineNameYAxisItemOpts(opts.MarkLineNameYAxisItem{Name: fmt.Sprintf("target %g ms", s.Target), YAxis: s.Target}))
	}
	return lc.Render(w)
}
