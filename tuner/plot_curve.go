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

// CurveSeries is one QPS-vs-latency curve (a benchmark cell): points in
// increasing load.
type CurveSeries struct {
	Name   string
	Points []CurvePoint
}

// CurvePoint is one load level: achieved QPS and a latency (ms).
type CurvePoint struct {
	Label   string // e.g. "c=64"
	QPS     float64
	Latency float64
}

// CurveOptions describe the curve chart.
type CurveOptions struct {
	Title        string
	Latency      string  // metric name for the axis label, e.g. "tpot_p99"
	LatencyLimit float64 // SLO line when > 0
	Width        vg.Length
	Height       vg.Length
}

// NewCurveChart draws QPS (x) against latency (y), one line per series
// with a filled circle per load level (SVGMarkers reads them back), and
// the SLO bound as a dashed line, in the front chart's style.
func NewCurveChart(series []CurveSeries, o CurveOptions) (*Chart, error) {
	var xs, ys []float64
	for _, s := range series {
		for _, q := range s.Points {
			xs, ys = append(xs, q.QPS), append(ys, q.Latency)
		}
	}
	if len(xs) == 0 {
		return nil, errors.New("curve chart: nothing to plot")
	}
	o.Width, o.Height = chartSize(o.Width, o.Height, 4.5*vg.Inch)
	if o.LatencyLimit > 0 {
		ys = append(ys, o.LatencyLimit)
	}
	p := plot.New()
	p.Title.Text = o.Title
	p.X.Label.Text = "achieved request rate (req/s)"
	p.Y.Label.Text = o.Latency + " (ms)"
	p.Add(plotter.NewGrid())
	p.X.Min, p.X.Max = paddedRange(xs)
	p.Y.Min, p.Y.Max = paddedRange(ys)
	for i, s := range series {
		if len(s.Points) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(s.Points))
		for j, q := range s.Points {
			pts[j] = plotter.XY{X: q.QPS, Y: q.Latency}
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("curve chart: %w", err)
		}
		c := plotutil.Color(i)
		l.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1.5)}
		sc.GlyphStyle = draw.GlyphStyle{Shape: draw.CircleGlyph{}, Radius: vg.Points(3.5), Color: c}
		p.Add(l, sc)
		p.Legend.Add(s.Name, l) // no glyph thumbnail: the only circles are data points
	}
	if o.LatencyLimit > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: o.LatencyLimit}, {X: p.X.Max, Y: o.LatencyLimit}})
		if err != nil {
			return nil, fmt.Errorf("curve chart: %w", err)
		}
		l.LineStyle = draw.LineStyle{Color: color.RGBA{R: 200, A: 255}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("SLO %s <= %g ms", o.Latency, o.LatencyLimit), l)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return &Chart{Plot: p, Width: o.Width, Height: o.Height}, nil
}

// WriteCurveHTML writes the curves as an interactive go-echarts page (a
// line per series, a tooltip per level with its load).
func WriteCurveHTML(w io.Writer, series []CurveSeries, o CurveOptions) error {
	n := 0
	for _, s := range series {
		n += len(s.Points)
	}
	if n == 0 {
		return errors.New("curve chart: nothing to plot")
	}
	lc := charts.NewLine()
	lc.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{PageTitle: "tuner: QPS vs latency", Width: "1100px", Height: "650px"}),
		charts.WithTitleOpts(opts.Title{Title: o.Title, Subtitle: "achieved request rate vs " + o.Latency}),
		charts.WithXAxisOpts(opts.XAxis{Name: "req/s", Type: "value", Scale: opts.Bool(true)}),
		charts.WithYAxisOpts(opts.YAxis{Name: o.Latency + " (ms)", Type: "value", Scale: opts.Bool(true)}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "item", Formatter: opts.FuncOpts(
			`function (p) { return p.seriesName + ' ' + p.name + '<br/>' + p.value[0].toFixed(2) + ' req/s<br/>` + o.Latency + ` ' + p.value[1].toFixed(2) + ' ms'; }`)}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Bottom: "0"}),
	)
	for i, s := range series {
		data := make([]opts.LineData, len(s.Points))
		for j, q := range s.Points {
			data[j] = opts.LineData{Name: q.Label, Value: []float64{q.QPS, q.Latency}, Symbol: "circle", SymbolSize: 8}
		}
		var so []charts.SeriesOpts
		if i == 0 && o.LatencyLimit > 0 {
			so = append(so, charts.WithMarkLineNameYAxisItemOpts(opts.MarkLineNameYAxisItem{Name: fmt.Sprintf("SLO %s <= %g ms", o.Latency, o.LatencyLimit), YAxis: o.LatencyLimit}))
		}
		lc.AddSeries(s.Name, data, so...)
	}
	return lc.Render(w)
}
