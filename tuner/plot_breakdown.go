package tuner

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/vllm-tuner/tuner/trial"
)

// BreakdownBar is one load level's mean request time split into its
// parts (ms): the engine's queue, prefill and decode, and the client's
// share (network, HTTP, client queueing).
type BreakdownBar struct {
	Label                          string // e.g. "chat c=64"
	Queue, Prefill, Decode, Client float64
}

// BarOf is the bar of a level's breakdown.
func BarOf(label string, b *trial.Breakdown) BreakdownBar {
	return BreakdownBar{Label: label, Queue: b.Queue.Mean, Prefill: b.Prefill.Mean, Decode: b.Decode.Mean, Client: b.ClientMS}
}

// BreakdownParts names the stacked parts, bottom first.
var BreakdownParts = []string{"queue", "prefill", "decode", "client"}

// breakdownColours: waiting in red, the engine's work in blues, the
// client in grey, so a queue-bound config stands out.
var breakdownColours = []color.RGBA{
	{R: 214, G: 39, B: 40, A: 255}, {R: 31, G: 119, B: 180, A: 255}, {R: 158, G: 202, B: 225, A: 255}, {R: 150, G: 150, B: 150, A: 255},
}

func (b BreakdownBar) parts() [4]float64 {
	// A client share below zero (timer skew on loopback) draws as nothing.
	return [4]float64{b.Queue, b.Prefill, b.Decode, math.Max(0, b.Client)}
}

// BreakdownOptions describe the breakdown chart.
type BreakdownOptions struct {
	Title  string
	Width  vg.Length // 0: 7 in
	Height vg.Length // 0: 4.5 in
}

// NewBreakdownChart draws one stacked bar per level: queue, prefill,
// decode and client share of the mean E2EL (ms), bottom to top.
func NewBreakdownChart(bars []BreakdownBar, o BreakdownOptions) (*Chart, error) {
	if len(bars) == 0 {
		return nil, errors.New("breakdown chart: nothing to plot (no level has a breakdown)")
	}
	o.Width, o.Height = chartSize(o.Width, o.Height, 4.5*vg.Inch)
	p := plot.New()
	p.Title.Text = o.Title
	p.Y.Label.Text = "mean request time (ms)"
	p.Add(plotter.NewGrid())
	names := make([]string, len(bars))
	for i, b := range bars {
		names[i] = b.Label
	}
	width := vg.Length(math.Min(40, float64(o.Width)*0.6/float64(len(bars))))
	var below *plotter.BarChart
	for k, part := range BreakdownParts {
		vals := make(plotter.Values, len(bars))
		for i, b := range bars {
			vals[i] = b.parts()[k]
		}
		bc, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, fmt.Errorf("breakdown chart: %w", err)
		}
		bc.Color = breakdownColours[k]
		bc.LineStyle = draw.LineStyle{Width: 0}
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(part, bc)
	}
	p.NominalX(names...)
	if len(bars) > 6 {
		// Many levels: slanted labels do not run into each other.
		p.X.Tick.Label.Rotation = math.Pi / 5
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YTop
	}
	top := 0.0
	for _, b := range bars {
		pt := b.parts()
		top = math.Max(top, pt[0]+pt[1]+pt[2]+pt[3])
	}
	// Headroom above the tallest bar for the legend in the top right.
	p.Y.Min, p.Y.Max = 0, math.Max(1, top*1.3)
	p.Legend.Top = true
	return &Chart{Plot: p, Width: o.Width, Height: o.Height}, nil
}

// WriteBreakdownHTML writes the stacked bars as an interactive go-echarts
// page (a tooltip per part with its ms).
func WriteBreakdownHTML(w io.Writer, bars []BreakdownBar, o BreakdownOptions) error {
	if len(bars) == 0 {
		return errors.New("breakdown chart: nothing to plot (no level has a breakdown)")
	}
	bc := charts.NewBar()
	bc.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{PageTitle: "tuner: where the time goes", Width: "1100px", Height: "650px"}),
		charts.WithTitleOpts(opts.Title{Title: o.Title, Subtitle: "mean request time: queue, prefill, decode (engine histograms) and the client's share"}),
		charts.WithYAxisOpts(opts.YAxis{Name: "ms", Type: "value"}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Bottom: "0"}),
	)
	names := make([]string, len(bars))
	for i, b := range bars {
		names[i] = b.Label
	}
	bc.SetXAxis(names)
	for k, part := range BreakdownParts {
		data := make([]opts.BarData, len(bars))
		for i, b := range bars {
			data[i] = opts.BarData{Value: math.Round(b.parts()[k]*100) / 100}
		}
		c := breakdownColours[k]
		bc.AddSeries(part, data, charts.WithBarChartOpts(opts.BarChart{Stack: "e2el"}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: fmt.Sprintf("rgb(%d,%d,%d)", c.R, c.G, c.B)}))
	}
	return bc.Render(w)
}
