package chart

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"html"
	"image/color"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/go-echarts/go-echarts/v2/types"
)

// echartsGz is Apache ECharts 5.4.3, the version go-echarts v2.6.0 targets
// (assets/README.md), gzip-compressed. Every page inlines it: GPU
// machines are often offline, and a page that loads it from elsewhere is
// blank there.
//
//go:embed assets/echarts.min.js.gz
var echartsGz []byte

// EChartsJS is the ECharts library, decompressed once.
var EChartsJS = sync.OnceValue(func() string {
	r, err := gzip.NewReader(bytes.NewReader(echartsGz))
	if err != nil {
		panic(fmt.Sprintf("chart: embedded echarts: %v", err)) // a broken build, caught by every test
	}
	b, err := io.ReadAll(r)
	if err != nil {
		panic(fmt.Sprintf("chart: embedded echarts: %v", err))
	}
	return string(b)
})

// pageStyle makes the chart fill its page (or the frame that shows it);
// the base template's own centring rules come later, hence !important.
const pageStyle = `<link rel="icon" href="data:,"><style>html,body{margin:0;padding:0;width:100%;height:100%;overflow:hidden;font-family:sans-serif}
.container{margin:0!important;display:block!important;width:100%;height:100%}.item{width:100%!important;height:100%!important}</style>`

// htmlLabelArea is the plot area labels are placed for: that of an 800 px
// wide frame, the narrowest the dashboard shows.
const htmlLabelW, htmlLabelH = 640.0, 300.0

// WriteHTML writes the figure as a self-contained interactive page made
// with go-echarts: ECharts inlined (no network request at all), the chart
// filling the window and following resizes, a tooltip on every point.
func WriteHTML(w io.Writer, f Figure) error {
	if err := f.check(); err != nil {
		return err
	}
	var base *charts.BaseConfiguration
	var render func(io.Writer) error
	if f.Parallel != nil {
		c := charts.NewParallel()
		base, render = &c.BaseConfiguration, c.Render
		f.parallelHTML(c)
	} else {
		c := charts.NewLine()
		base, render = &c.BaseConfiguration, c.Render
		f.panelsHTML(&c.RectChart)
		// Line.Validate sets the first x axis' categories from SetXAxis.
		c.SetXAxis(c.XAxisList[0].Data)
	}
	base.Initialization.PageTitle, base.Initialization.Width, base.Initialization.Height = "tuner: "+f.what(), "100%", "100%"
	base.Title = opts.Title{Title: f.Title, Subtitle: f.Subtitle, Left: "center",
		TitleStyle: &opts.TextStyle{FontSize: 15}, SubtitleStyle: &opts.TextStyle{FontSize: 12, Color: "#444", LineHeight: 16}}
	base.Tooltip = opts.Tooltip{Show: opts.Bool(true), Trigger: "item",
		Formatter: opts.FuncOpts(`function (p) { if (p.data && p.data.tip) return p.data.tip; return p.seriesName + (p.name ? ' ' + p.name : '') + ': ' + (Array.isArray(p.value) ? p.value[p.value.length - 1] : p.value); }`)}
	base.Legend.Show, base.Legend.Type, base.Legend.Bottom = opts.Bool(true), "scroll", "4"
	base.ClearPresetJSAssets() // no script from elsewhere: ECharts comes inlined
	base.AddCustomizedHeaders(pageStyle, "<script>"+EChartsJS()+"</script>")
	base.AddJSFuncs(`window.addEventListener('resize', function () { %MY_ECHARTS%.resize(); });`)
	return render(w)
}

// panelsHTML sets a rectangular chart's grids, axes and series: one grid
// per panel, stacked, between the title and the legend.
func (f *Figure) panelsHTML(c *charts.RectChart) {
	f.ownPanels()
	n := len(f.Panels)
	top := 10.0
	if f.Subtitle != "" {
		top += 4 * float64(strings.Count(f.Subtitle, "\n")+1)
	}
	const bottom, gap = 14.0, 9.0
	h := (100 - top - bottom - gap*float64(n-1)) / float64(n)
	c.XAxisList, c.YAxisList, c.MultiSeries = nil, nil, nil
	var icons []Series // the description of each ECharts series
	for i := range f.Panels {
		p := &f.Panels[i]
		xStep, yStep := p.layout()
		c.GridList = append(c.GridList, opts.Grid{Left: "56", Right: "40", Top: pct(top + float64(i)*(h+gap)), Height: pct(h), ContainLabel: opts.Bool(true)})
		c.XAxisList = append(c.XAxisList, xAxisHTML(p.X, xStep, i))
		y := xAxisHTML(p.Y, yStep, i)
		// The y axis' name runs along it, left of the tick labels (which
		// the grid contains).
		c.YAxisList = append(c.YAxisList, opts.YAxis{Name: y.Name, Type: y.Type, GridIndex: i, Min: y.Min, Max: y.Max, Data: y.Data,
			MinInterval: y.MinInterval, MaxInterval: y.MaxInterval, AxisLabel: y.AxisLabel, NameLocation: "middle", NameGap: 48, SplitLine: y.SplitLine})
		sides := placeLabels(p, htmlLabelW, htmlLabelH/float64(n))
		for si := range p.Series {
			c.MultiSeries = append(c.MultiSeries, seriesHTML(p, si, i, sides))
			icons = append(icons, p.Series[si])
		}
		for _, r := range p.Rules {
			c.MultiSeries = append(c.MultiSeries, ruleHTML(p, r, i))
			icons = append(icons, Series{Kind: Line, Dashed: true})
		}
	}
	// Legend entries in series order, each once (rules of several panels
	// may share a name), a line without markers shown as a line (ECharts
	// would draw a circle).
	var entries []map[string]any
	seen := map[string]bool{}
	for i, s := range c.MultiSeries {
		if seen[s.Name] || s.Name == "" {
			continue
		}
		seen[s.Name] = true
		e := map[string]any{"name": s.Name}
		if icon := legendIcon(icons[i]); icon != "" {
			e["icon"] = icon
		}
		entries = append(entries, e)
	}
	c.Legend.Data = entries
}

// legendIcon is the legend sample of a series drawn with a line and no
// marker: a solid or dashed stroke ("" for ECharts' own sample).
func legendIcon(s Series) string {
	switch {
	case s.Kind == Bar:
		return "rect"
	case s.Marker.Shape != NoMarker:
		if s.Kind == Scatter {
			return echartsSymbol(s.Marker.Shape)
		}
		return ""
	case s.Dashed:
		return "path://M0,4h6v2h-6zM9,4h6v2h-6zM18,4h6v2h-6z"
	}
	return "path://M0,4h24v2h-24z"
}

func pct(v float64) string { return fmt.Sprintf("%.1f%%", v) }

// xAxisHTML is an axis of grid i with the panel's round ticks: a fixed
// interval (min and max interval equal) and labels with its decimals.
func xAxisHTML(a Axis, step float64, grid int) opts.XAxis {
	if a.Categories != nil {
		return opts.XAxis{Name: a.Label(), Type: "category", Data: a.Categories, GridIndex: grid, NameLocation: "middle", NameGap: 30,
			AxisLabel: &opts.AxisLabel{Interval: "0", HideOverlap: opts.Bool(true)}}
	}
	d := decimals(step)
	return opts.XAxis{Name: a.Label(), Type: "value", GridIndex: grid, Min: a.Min, Max: a.Max, MinInterval: step, MaxInterval: step,
		NameLocation: "middle", NameGap: 28, SplitLine: &opts.SplitLine{Show: opts.Bool(true)},
		AxisLabel: &opts.AxisLabel{Formatter: opts.FuncOpts(fmt.Sprintf(`function (v) { return v.toFixed(%d); }`, d))}}
}

// echartsSymbol is a marker shape as ECharts names it; a ring is an empty
// circle (its border takes the series colour), a cross an SVG path.
func echartsSymbol(s Shape) string {
	switch s {
	case Circle:
		return "circle"
	case Ring:
		return "emptyCircle"
	case Square:
		return "rect"
	case Diamond:
		return "diamond"
	case Triangle:
		return "triangle"
	case Cross:
		return "path://M0,2L2,0L5,3L8,0L10,2L7,5L10,8L8,10L5,7L2,10L0,8L3,5Z"
	}
	return "none"
}

// seriesHTML is series si of panel p on grid g.
func seriesHTML(p *Panel, si, g int, sides map[[2]int]Side) charts.SingleSeries {
	s := p.Series[si]
	col := Hex(s.Colour)
	out := charts.SingleSeries{Name: s.Name, XAxisIndex: g, YAxisIndex: g, Color: col,
		Symbol: echartsSymbol(s.Marker.Shape), SymbolSize: markerSize(s), ItemStyle: &opts.ItemStyle{Color: col}}
	if s.NoLegend {
		out.Name = ""
	}
	switch s.Kind {
	case Scatter:
		out.Type = types.ChartScatter
	case Bar:
		out.Type, out.Stack, out.Symbol = types.ChartBar, s.Stack, ""
	default:
		out.Type = types.ChartLine
		w := s.Width
		if w == 0 {
			w = 1.5
		}
		ls := &opts.LineStyle{Color: col, Width: float32(w)}
		if s.Dashed {
			ls.Type = "dashed"
		}
		out.LineStyle = ls
		if s.Kind == Step {
			out.Step = "end"
		}
		if s.Marker.Shape == NoMarker {
			out.ShowSymbol = opts.Bool(false)
		}
	}
	data := make([]map[string]any, len(s.Points))
	for pi, q := range s.Points {
		d := map[string]any{}
		switch {
		case q.Missing:
			d["value"] = "-"
		case s.Kind == Bar && p.Horizontal:
			d["value"] = []float64{round(q.Y), float64(q.Cat)}
		case s.Kind == Bar:
			d["value"] = []float64{float64(q.Cat), round(q.Y)}
		default:
			d["value"] = []float64{q.X, q.Y}
		}
		if q.Tip != "" {
			d["tip"] = tipHTML(q.Tip)
		}
		if q.Covered {
			d["symbol"] = "none"
		}
		if side, ok := sides[[2]int{si, pi}]; ok && side != Hidden {
			d["label"] = map[string]any{"show": true, "formatter": q.Label, "position": map[Side]string{Right: "right", Left: "left", Above: "top", Below: "bottom"}[side],
				"color": "#333", "fontSize": labelFont}
		}
		data[pi] = d
	}
	out.Data = data
	return out
}

func markerSize(s Series) float64 {
	if s.Marker.Shape == NoMarker {
		return 0
	}
	if s.Marker.Size == 0 {
		return 7
	}
	return s.Marker.Size
}

// round keeps two decimals of a bar's value for its tooltip.
func round(v float64) float64 { return math.Round(v*100) / 100 }

// tipHTML is a tooltip text as HTML: escaped, one line per line.
func tipHTML(tip string) string {
	return strings.ReplaceAll(html.EscapeString(tip), "\n", "<br/>")
}

// ruleHTML is a rule as a series of its own (so the legend lists it, with
// its dashed red line): a mark line at the bound, or at the edge with an
// arrow and the bound's value when it lies beyond.
func ruleHTML(p *Panel, r Rule, g int) charts.SingleSeries {
	col := r.Colour
	if col == (color.RGBA{}) {
		col = Red
	}
	hex := Hex(col)
	axis := "yAxis"
	if r.OnX {
		axis = "xAxis"
	}
	s := charts.SingleSeries{Name: r.label(), Type: types.ChartLine, XAxisIndex: g, YAxisIndex: g, Color: hex, Symbol: "none",
		LineStyle: &opts.LineStyle{Color: hex, Type: "dashed", Width: 1.2}, Data: []any{}}
	s.MarkLines = &opts.MarkLines{MarkLineStyle: opts.MarkLineStyle{Symbol: []string{"none", "none"}}}
	line := map[string]any{axis: r.at, "name": r.Name, "lineStyle": map[string]any{"color": hex, "type": "dashed", "width": 1.2},
		"label": map[string]any{"show": true, "formatter": r.Name, "color": hex, "position": "insideEndTop"}, "symbol": "none"}
	marks := []any{line}
	s.MarkLines.Data = marks
	if r.beyond != "" {
		x, y := (p.X.Min+p.X.Max)/2, r.at
		if r.OnX {
			x, y = r.at, (p.Y.Min+p.Y.Max)/2
		}
		rot := map[string]float64{"top": 0, "left": 90, "bottom": 180, "right": -90}[r.beyond]
		s.MarkPoints = &opts.MarkPoints{}
		s.MarkPoints.Data = []any{map[string]any{"coord": []float64{x, y}, "symbol": "arrow", "symbolSize": 14, "symbolRotate": rot,
			"itemStyle": map[string]any{"color": hex},
			"label":     map[string]any{"show": true, "formatter": fmt.Sprintf("%g %s", r.Value, arrowText[r.beyond]), "color": hex, "position": arrowLabelSide[r.beyond]}}}
	}
	return s
}

var arrowLabelSide = map[string]string{"right": "left", "left": "right", "top": "bottom", "bottom": "top"}

// parallelHTML sets a parallel-coordinates chart: an axis per dimension,
// a line per row in its colour.
func (f *Figure) parallelHTML(c *charts.Parallel) {
	pc := f.Parallel
	c.ParallelComponent = opts.ParallelComponent{Left: "12%", Right: "12%", Top: "80", Bottom: "60"}
	axes := make([]opts.ParallelAxis, len(pc.Dims))
	for i, d := range pc.Dims {
		axes[i] = opts.ParallelAxis{Dim: i, Name: d.Name, NameLocation: "end"}
		if d.Categories != nil {
			axes[i].Type, axes[i].Data = "category", d.Categories
			continue
		}
		hi := math.Inf(-1)
		for _, r := range pc.Rows {
			hi = max(hi, r.Values[i])
		}
		if _, top, _ := Ticks(0, hi, 5); hi > 0 {
			axes[i].Max = top
		}
	}
	c.ParallelAxisList = axes
	groups := pc.groups()
	var names []string
	for _, g := range groups {
		names = append(names, g.name)
	}
	c.Legend.Data = names
	for _, g := range groups {
		data := make([]map[string]any, len(g.rows))
		for i, r := range g.rows {
			vals := make([]any, len(r.Values))
			for j, v := range r.Values {
				vals[j] = v
				if pc.Dims[j].Categories != nil {
					vals[j] = pc.Dims[j].Categories[int(v)]
				}
			}
			data[i] = map[string]any{"value": vals, "name": r.Name}
			if r.Tip != "" {
				data[i]["tip"] = tipHTML(r.Tip)
			}
		}
		c.MultiSeries = append(c.MultiSeries, charts.SingleSeries{Name: g.name, Type: types.ChartParallel, Color: Hex(g.colour),
			LineStyle: &opts.LineStyle{Width: 1.5, Opacity: opts.Float(0.8), Color: Hex(g.colour)}, Data: data})
	}
}

// Render writes the figure as "svg", "png" (Write) or "html" (WriteHTML).
func Render(w io.Writer, f Figure, format string) error {
	if format == "html" {
		return WriteHTML(w, f)
	}
	return Write(w, f, format)
}
