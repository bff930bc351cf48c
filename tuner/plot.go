package tuner

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ChartPoint is one trial on the front chart.
type ChartPoint struct {
	Label      string  `json:"label"` // e.g. the trial ID
	Throughput float64 `json:"throughput"`
	Latency    float64 `json:"latency"` // ms
	VRAM       float64 `json:"vram_gib"`
}

// ChartOptions describe the front chart.
type ChartOptions struct {
	Title      string
	Throughput string // metric names for the axis labels
	Latency    string
	// LatencyLimit and ThroughputLimit draw SLO lines when > 0.
	LatencyLimit    float64
	ThroughputLimit float64
	// Default marks vLLM's default config (nil: not measured).
	Default *ChartPoint
	// Recommended rings the config `tuner recommend` picks (nil: none).
	Recommended *ChartPoint
	// Others are the remaining measured configs, drawn small and grey.
	Others []ChartPoint
	// VRAMEstimated says that the VRAM figures are estimates from
	// --gpu-memory-utilization, not measurements.
	VRAMEstimated bool
	Width         vg.Length // 0: 7 in
	Height        vg.Length // 0: 4.5 in
}

// Chart is the throughput-vs-latency plot of a front: the front's members
// as filled circles whose colour and size follow peak VRAM, other configs as
// grey crosses, the default config as an open square, the recommended one
// ringed, SLO bounds as dashed lines. The axes zoom to the points; an SLO
// bound outside them is drawn at the edge and its legend says so. It is
// drawn with gonum.org/v1/plot.
type Chart struct {
	Plot          *plot.Plot
	Width, Height vg.Length
}

// NewFrontChart builds the chart of front.
func NewFrontChart(front []ChartPoint, o ChartOptions) (*Chart, error) {
	if len(front) == 0 && o.Default == nil && len(o.Others) == 0 {
		return nil, errors.New("front chart: nothing to plot")
	}
	o.Width, o.Height = chartSize(o.Width, o.Height, 4.5*vg.Inch)
	p := plot.New()
	p.Title.Text = o.Title
	p.X.Label.Text = o.Latency + " (ms)"
	p.Y.Label.Text = o.Throughput
	if u := MetricUnit(o.Throughput); u != "" {
		p.Y.Label.Text += " (" + u + ")"
	}
	p.Add(plotter.NewGrid())
	var legend []string // the legend's labels, to place it
	addLegend := func(label string, t plot.Thumbnailer) {
		p.Legend.Add(label, t)
		legend = append(legend, label)
	}

	// Axis ranges over the points only, padded: an SLO bound far from them
	// would squeeze every point into a corner.
	xs, ys := []float64{}, []float64{}
	all := append(append([]ChartPoint{}, front...), o.Others...)
	if o.Default != nil {
		all = append(all, *o.Default)
	}
	for _, q := range all {
		xs, ys = append(xs, q.Latency), append(ys, q.Throughput)
	}
	p.X.Min, p.X.Max = paddedRange(xs)
	p.Y.Min, p.Y.Max = paddedRange(ys)
	if o.LatencyLimit > 0 {
		p.X.Min, p.X.Max = near(p.X.Min, p.X.Max, o.LatencyLimit)
	}
	if o.ThroughputLimit > 0 {
		p.Y.Min, p.Y.Max = near(p.Y.Min, p.Y.Max, o.ThroughputLimit)
	}

	if len(o.Others) > 0 {
		s, err := plotter.NewScatter(xys(o.Others))
		if err != nil {
			return nil, fmt.Errorf("front chart: %w", err)
		}
		s.GlyphStyle = draw.GlyphStyle{Shape: draw.CrossGlyph{}, Radius: vg.Points(2.5), Color: color.Gray{Y: 150}}
		p.Add(s)
		addLegend("other configs", s)
	}
	if len(front) > 0 {
		s, err := plotter.NewScatter(xys(front))
		if err != nil {
			return nil, fmt.Errorf("front chart: %w", err)
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, q := range front {
			lo, hi = min(lo, q.VRAM), max(hi, q.VRAM)
		}
		cmap := moreland.SmoothBlueRed()
		if hi > lo {
			cmap.SetMin(lo)
			cmap.SetMax(hi)
		} else {
			cmap.SetMin(lo - 1)
			cmap.SetMax(lo + 1)
		}
		s.GlyphStyleFunc = func(i int) draw.GlyphStyle {
			v := front[i].VRAM
			if hi <= lo { // one VRAM level: one colour, one size
				return draw.GlyphStyle{Shape: draw.CircleGlyph{}, Radius: vg.Points(5), Color: color.RGBA{R: 59, G: 76, B: 192, A: 255}}
			}
			frac := (v - lo) / (hi - lo)
			return draw.GlyphStyle{Shape: draw.CircleGlyph{}, Radius: vg.Points(3 + 5*frac), Color: colourAt(cmap, v)}
		}
		// The legend's sample is a ring: only front members are filled
		// circles (SVGMarkers counts them).
		s.GlyphStyle = draw.GlyphStyle{Shape: draw.RingGlyph{}, Radius: vg.Points(4), Color: color.RGBA{R: 59, G: 76, B: 192, A: 255}}
		p.Add(s)
		addLegend("Pareto front", s)
		est := ""
		if o.VRAMEstimated {
			est = " (estimated)"
		}
		legend := fmt.Sprintf("colour and size = peak VRAM%s %.1f (blue) to %.1f GiB (red)", est, lo, hi)
		if hi <= lo {
			legend = fmt.Sprintf("peak VRAM%s %.1f GiB", est, lo)
		}
		p.Title.Text = strings.TrimSpace(fmt.Sprintf("%s\nPareto front: %d configs; %s", o.Title, len(front), legend))
	}
	if o.Recommended != nil {
		s, err := plotter.NewScatter(xys([]ChartPoint{*o.Recommended}))
		if err != nil {
			return nil, fmt.Errorf("front chart: %w", err)
		}
		s.GlyphStyle = draw.GlyphStyle{Shape: draw.RingGlyph{}, Radius: vg.Points(10), Color: color.RGBA{G: 140, A: 255}}
		p.Add(s)
		addLegend("recommended", s)
	}
	if o.Default != nil {
		s, err := plotter.NewScatter(xys([]ChartPoint{*o.Default}))
		if err != nil {
			return nil, fmt.Errorf("front chart: %w", err)
		}
		s.GlyphStyle = draw.GlyphStyle{Shape: draw.SquareGlyph{}, Radius: vg.Points(6), Color: color.Black}
		p.Add(s)
		addLegend("vLLM default", s)
	}
	dashed := func(pts plotter.XYs, label string) error {
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("front chart: %w", err)
		}
		l.LineStyle = draw.LineStyle{Color: color.RGBA{R: 200, A: 255}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
		p.Add(l)
		addLegend(label, l)
		return nil
	}
	if o.LatencyLimit > 0 {
		x, where := edge(o.LatencyLimit, p.X.Min, p.X.Max, "right", "left")
		if err := dashed(plotter.XYs{{X: x, Y: p.Y.Min}, {X: x, Y: p.Y.Max}}, fmt.Sprintf("SLO %s <= %g ms%s", o.Latency, o.LatencyLimit, where)); err != nil {
			return nil, err
		}
	}
	if o.ThroughputLimit > 0 {
		y, where := edge(o.ThroughputLimit, p.Y.Min, p.Y.Max, "top", "bottom")
		if err := dashed(plotter.XYs{{X: p.X.Min, Y: y}, {X: p.X.Max, Y: y}}, fmt.Sprintf("SLO %s >= %g%s", o.Throughput, o.ThroughputLimit, where)); err != nil {
			return nil, err
		}
	}
	placeLegend(p, legend, all, o.Width, o.Height)
	return &Chart{Plot: p, Width: o.Width, Height: o.Height}, nil
}

// placeLegend puts the legend in the corner of the data area that covers
// the fewest points (bottom right, the dominated corner, on a tie); when
// every corner holds some, it makes room above the points.
func placeLegend(p *plot.Plot, legend []string, pts []ChartPoint, w, h vg.Length) {
	labels := 0
	for _, l := range legend {
		labels = max(labels, len(l))
	}
	// The legend's share of the data area, from the font size and the
	// canvas (about 60 points of axes and 70 of titles are not data).
	size := float64(p.Legend.TextStyle.Font.Size.Points())
	fw := (float64(labels)*size*0.55 + 30) / (float64(w.Points()) - 60)
	fh := float64(len(legend)) * size * 1.25 / (float64(h.Points()) - 70)
	count := func(left, top bool) int {
		n := 0
		for _, q := range pts {
			x := (q.Latency - p.X.Min) / (p.X.Max - p.X.Min)
			y := (q.Throughput - p.Y.Min) / (p.Y.Max - p.Y.Min)
			inX := (left && x <= fw) || (!left && x >= 1-fw)
			inY := (top && y >= 1-fh) || (!top && y <= fh)
			if inX && inY {
				n++
			}
		}
		return n
	}
	best, bestN := [2]bool{false, false}, count(false, false)
	for _, c := range [][2]bool{{true, true}, {false, true}, {true, false}} {
		if n := count(c[0], c[1]); n < bestN {
			best, bestN = c, n
		}
	}
	if bestN > 0 { // no free corner: room above the points
		best = [2]bool{false, true}
		p.Y.Max += (p.Y.Max - p.Y.Min) * fh / (1 - fh)
	}
	p.Legend.Left, p.Legend.Top = best[0], best[1]
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(6), vg.Points(6)
	if best[0] {
		p.Legend.XOffs = vg.Points(6)
	}
	if best[1] {
		p.Legend.YOffs = -vg.Points(6)
	}
}

// near widens [lo, hi] to show a bound v that lies within 30% of the span
// outside it; farther bounds are left to edge.
func near(lo, hi, v float64) (float64, float64) {
	span := hi - lo
	switch {
	case v > hi && v <= hi+0.3*span:
		hi = v + 0.03*span
	case v < lo && v >= lo-0.3*span:
		lo = math.Max(0, v-0.03*span)
	}
	return lo, hi
}

// edge places a bound on an axis [lo, hi]: where it is, or at the edge it
// lies beyond, with a legend note saying so.
func edge(v, lo, hi float64, above, below string) (float64, string) {
	switch {
	case v > hi:
		return hi, fmt.Sprintf(" (beyond the %s edge)", above)
	case v < lo:
		return lo, fmt.Sprintf(" (beyond the %s edge)", below)
	}
	return v, ""
}

// MetricUnit is the unit of a throughput or latency metric ("" when it has
// none or is unknown).
func MetricUnit(name string) string {
	switch {
	case strings.HasPrefix(name, "request_"):
		return "req/s"
	case strings.HasSuffix(name, "_throughput"):
		return "tok/s"
	case strings.HasPrefix(name, "ttft_"), strings.HasPrefix(name, "tpot_"), strings.HasPrefix(name, "itl_"), strings.HasPrefix(name, "e2el_"):
		return "ms"
	}
	return ""
}

func colourAt(c palette.ColorMap, v float64) color.Color {
	col, err := c.At(v)
	if err != nil {
		return color.Black
	}
	return col
}

func xys(pts []ChartPoint) plotter.XYs {
	out := make(plotter.XYs, len(pts))
	for i, q := range pts {
		out[i] = plotter.XY{X: q.Latency, Y: q.Throughput}
	}
	return out
}

// chartSize is a chart's size: 7 in wide and height tall unless set.
func chartSize(w, h, height vg.Length) (vg.Length, vg.Length) {
	if w == 0 {
		w = 7 * vg.Inch
	}
	if h == 0 {
		h = height
	}
	return w, h
}

// paddedRange is [min, max] widened by 8% on each side (or by 1 when flat).
func paddedRange(v []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	if lo > hi {
		return 0, 1
	}
	pad := (hi - lo) * 0.08
	if pad == 0 {
		pad = math.Max(1, math.Abs(lo)*0.1)
	}
	return math.Max(0, lo-pad), hi + pad
}

// Write renders the chart as "svg" or "png".
func (c *Chart) Write(w io.Writer, format string) error {
	switch format {
	case "svg", "png":
	default:
		return fmt.Errorf("front chart: format %q (want svg or png)", format)
	}
	wt, err := c.Plot.WriterTo(c.Width, c.Height, format)
	if err != nil {
		return fmt.Errorf("front chart: %w", err)
	}
	_, err = wt.WriteTo(w)
	return err
}

// Pixel is where the data point (latency, throughput) lands on the canvas,
// in points with y up (the SVG's coordinates inside its flipping group).
func (c *Chart) Pixel(latency, throughput float64) (x, y float64, err error) {
	cv, err := draw.NewFormattedCanvas(c.Width, c.Height, "svg")
	if err != nil {
		return 0, 0, err
	}
	dc := c.Plot.DataCanvas(draw.New(cv))
	fx, fy := c.Plot.Transforms(&dc)
	return float64(fx(latency).Points()), float64(fy(throughput).Points()), nil
}
