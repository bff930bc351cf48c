package tuner

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
)

// echartsJS is Apache ECharts 5.4.3 (assets/echarts/README.md), inlined
// into every page: GPU machines are often offline, and a page that loads
// it from a CDN is blank there.
//
//go:embed assets/echarts/echarts.min.js
var echartsJS string

// WriteFrontHTML writes the front chart as an interactive, self-contained
// HTML page made with go-echarts: the same series as NewFrontChart (front,
// other configs, vLLM's default, the recommended config, SLO lines), colour
// mapped to peak VRAM, a tooltip per point with its config and values, zoom
// by dragging. ECharts is inlined, so the page needs no network.
func WriteFrontHTML(w io.Writer, front []ChartPoint, o ChartOptions) error {
	if len(front) == 0 && o.Default == nil && len(o.Others) == 0 {
		return errors.New("front chart: nothing to plot")
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	all := append(append([]ChartPoint{}, front...), o.Others...)
	if o.Default != nil {
		all = append(all, *o.Default)
	}
	for _, q := range all {
		lo, hi = min(lo, q.VRAM), max(hi, q.VRAM)
	}
	if hi <= lo {
		lo, hi = lo-1, hi+1
	}
	yName := o.Throughput
	if u := MetricUnit(o.Throughput); u != "" {
		yName += " (" + u + ")"
	}
	vram := "peak VRAM (GiB)"
	if o.VRAMEstimated {
		vram = "peak VRAM (GiB, estimated from --gpu-memory-utilization)"
	}
	// The axes as the static chart's: zoomed to the points, widened for an
	// SLO bound close to them; a far bound is named in the subtitle.
	var xs, ys []float64
	for _, q := range all {
		xs, ys = append(xs, q.Latency), append(ys, q.Throughput)
	}
	x0, x1 := paddedRange(xs)
	y0, y1 := paddedRange(ys)
	sub := fmt.Sprintf("Pareto front: %d configs; colour = %s", len(front), vram)
	if o.LatencyLimit > 0 {
		x0, x1 = near(x0, x1, o.LatencyLimit)
		if _, where := edge(o.LatencyLimit, x0, x1, "right", "left"); where != "" {
			sub += fmt.Sprintf("; SLO %s <= %g ms%s", o.Latency, o.LatencyLimit, where)
		}
	}
	if o.ThroughputLimit > 0 {
		y0, y1 = near(y0, y1, o.ThroughputLimit)
		if _, where := edge(o.ThroughputLimit, y0, y1, "top", "bottom"); where != "" {
			sub += fmt.Sprintf("; SLO %s >= %g%s", o.Throughput, o.ThroughputLimit, where)
		}
	}
	sc := charts.NewScatter()
	sc.ClearPresetJSAssets()
	// "</script" cannot occur in the bundled file (checked by a test), so
	// inlining it cannot end the element early.
	sc.AddCustomizedHeaders("<script>" + echartsJS + "</script>")
	sc.SetGlobalOptions(
		charts.WithInitializationOpts(opts.Initialization{PageTitle: "tuner: Pareto front", Width: "1100px", Height: "650px"}),
		charts.WithTitleOpts(opts.Title{Title: o.Title, Subtitle: sub}),
		charts.WithXAxisOpts(opts.XAxis{Name: o.Latency + " (ms)", Type: "value", Min: roundAxis(x0), Max: roundAxis(x1)}),
		charts.WithYAxisOpts(opts.YAxis{Name: yName, Type: "value", Min: roundAxis(y0), Max: roundAxis(y1)}),
		charts.WithVisualMapOpts(opts.VisualMap{
			Calculable: opts.Bool(true), Min: float32(lo), Max: float32(hi), Dimension: "2",
			Text: []string{"VRAM GiB high", "low"}, Right: "10", Top: "middle",
			InRange: &opts.VisualMapInRange{Color: []string{"#3b4cc0", "#dddddd", "#b40426"}},
		}),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "item", Formatter: opts.FuncOpts(
			`function (p) { return p.seriesName + '<br/>' + p.name + '<br/>` + o.Latency + ` ' + p.value[0].toFixed(2) + ' ms<br/>` +
				o.Throughput + ` ' + p.value[1].toFixed(1) + '<br/>VRAM ' + p.value[2].toFixed(1) + ' GiB'; }`)}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Bottom: "0"}),
		charts.WithDataZoomOpts(opts.DataZoom{Type: "inside", XAxisIndex: []int{0}}, opts.DataZoom{Type: "inside", YAxisIndex: []int{0}}),
	)
	data := func(pts []ChartPoint, symbol string, size int) []opts.ScatterData {
		out := make([]opts.ScatterData, len(pts))
		for i, q := range pts {
			out[i] = opts.ScatterData{Name: q.Label, Value: []float64{q.Latency, q.Throughput, q.VRAM}, Symbol: symbol, SymbolSize: size}
		}
		return out
	}
	var lines []charts.SeriesOpts
	if o.LatencyLimit > 0 {
		lines = append(lines, charts.WithMarkLineNameXAxisItemOpts(opts.MarkLineNameXAxisItem{Name: fmt.Sprintf("SLO %s <= %g ms", o.Latency, o.LatencyLimit), XAxis: o.LatencyLimit}))
	}
	if o.ThroughputLimit > 0 {
		lines = append(lines, charts.WithMarkLineNameYAxisItemOpts(opts.MarkLineNameYAxisItem{Name: fmt.Sprintf("SLO %s >= %g", o.Throughput, o.ThroughputLimit), YAxis: o.ThroughputLimit}))
	}
	if len(lines) > 0 {
		lines = append(lines, charts.WithMarkLineStyleOpts(opts.MarkLineStyle{Symbol: []string{"none", "none"},
			Label: &opts.Label{Show: opts.Bool(true), Formatter: "{b}"}}))
	}
	sc.AddSeries("Pareto front", data(front, "circle", 14), lines...)
	if len(o.Others) > 0 {
		sc.AddSeries("other configs", data(o.Others, "triangle", 7))
	}
	if o.Default != nil {
		sc.AddSeries("vLLM default", data([]ChartPoint{*o.Default}, "rect", 16))
	}
	if o.Recommended != nil {
		sc.AddSeries("recommended", data([]ChartPoint{*o.Recommended}, "pin", 30))
	}
	return sc.Render(w)
}

// roundAxis rounds an axis bound to 3 significant digits for tidy ticks.
func roundAxis(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, math.Floor(math.Log10(math.Abs(v)))-2)
	return math.Round(v/p) * p
}
