package chart

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"
)

// Figure is what one chart shows, independent of the format it is drawn
// in: a title, one or more panels stacked top to bottom, and the page
// title of its HTML form. Write draws it as SVG or PNG, WriteHTML as a
// self-contained page.
type Figure struct {
	Title    string
	Subtitle string // a second title line (the gain, a note on VRAM)
	Page     string // the HTML page title
	Panels   []Panel
	// Parallel, when set, replaces the panels: parallel coordinates.
	Parallel *Parallel
	// Width and Height of the SVG/PNG drawing in points (0: 504 by 324,
	// 7 by 4.5 inches; more panels add height).
	Width, Height float64
}

// Panel is one plotting area: two axes, its series and rules.
type Panel struct {
	X, Y   Axis
	Series []Series
	Rules  []Rule
	// Horizontal draws bars along x with the categories on y.
	Horizontal bool
	// Weight is the panel's share of the figure's height (0: 1).
	Weight float64
}

// Axis is a panel's axis: a value axis whose range is rounded out to the
// ticks, or a category axis when Categories is set.
type Axis struct {
	Name string
	Unit string // shown after the name: "tpot_p99 (ms)"
	// Min and Max fix the range (equal: from the data).
	Min, Max   float64
	Categories []string
	// Zero includes 0 in a range taken from the data.
	Zero bool
}

// Label is the axis' title with its unit.
func (a Axis) Label() string {
	if a.Unit == "" {
		return a.Name
	}
	return a.Name + " (" + a.Unit + ")"
}

// Kind is how a series is drawn.
type Kind int

const (
	// Scatter draws markers only.
	Scatter Kind = iota
	// Line joins the points in order, with markers when Marker.Shape is set.
	Line
	// Step joins the points with horizontal-then-vertical steps (a front).
	Step
	// Bar draws a bar per category (stacked when Stack is set).
	Bar
)

// Shape is a marker's shape.
type Shape int

const (
	NoMarker Shape = iota
	Circle         // filled
	Ring           // hollow circle
	Square         // filled
	Diamond        // filled
	Triangle       // filled
	Cross
)

// Marker is how each point of a series is marked.
type Marker struct {
	Shape Shape
	Size  float64 // diameter in points
}

// Series is one legend entry: its points and how they are drawn.
type Series struct {
	Name   string
	Kind   Kind
	Colour color.RGBA
	Marker Marker
	Width  float64 // line width in points (0: 1.5)
	Dashed bool
	Points []Point
	Stack  string // Bar: series with the same Stack pile up
	// NoLegend keeps the series out of the legend (a second line of the
	// same thing).
	NoLegend bool
}

// Point is one data point. Cat indexes the category axis of a Bar series
// (X is ignored then). Label is printed beside the marker, Tip shown on
// hover in HTML.
type Point struct {
	X, Y  float64
	Cat   int
	Label string
	Tip   string
	// Missing leaves a gap (a run without this cell).
	Missing bool
	// Covered hides the point's marker in HTML, where a named marker of
	// another series (the recommended config) sits on it.
	Covered bool
}

// Rule is a bound drawn across a panel: a dashed line at Value on the X or
// Y axis; one outside the panel's range becomes an arrow on the edge it
// lies beyond, labelled with its value.
type Rule struct {
	Name   string
	OnX    bool // a vertical line at x = Value; else horizontal at y = Value
	Value  float64
	Colour color.RGBA
	// Place is set by layout: where the rule is drawn, and beyond which
	// edge it lies ("" when inside).
	at     float64
	beyond string
}

// Parallel is a parallel-coordinates chart: one vertical axis per
// dimension, one line per row, coloured by Colour (0 to 1).
type Parallel struct {
	Dims []Dim
	Rows []Row
	// ColourName names what colours the lines ("throughput (tok/s)").
	ColourName string
}

// Dim is one axis of a parallel-coordinates chart: numeric, or a category
// axis when Categories is set (values index it).
type Dim struct {
	Name       string
	Categories []string
}

// Row is one line across the dimensions.
type Row struct {
	Name   string
	Values []float64
	Colour float64 // 0 (worst) to 1 (best); NaN: grey (infeasible)
	Tip    string
}

// The palette: one colour per role, so that a legend sample always has the
// colour of its markers.
var (
	Blue      = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	LightBlue = color.RGBA{R: 140, G: 190, B: 225, A: 255}
	Orange    = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	Green     = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	Red       = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	Grey      = color.RGBA{R: 160, G: 160, B: 160, A: 255}
	Purple    = color.RGBA{R: 148, G: 103, B: 189, A: 255}
	Brown     = color.RGBA{R: 140, G: 86, B: 75, A: 255}
	Pink      = color.RGBA{R: 227, G: 119, B: 194, A: 255}
	Olive     = color.RGBA{R: 188, G: 189, B: 34, A: 255}
	Cyan      = color.RGBA{R: 23, G: 190, B: 207, A: 255}
)

// Cycle is the colour of the i-th of several like series.
func Cycle(i int) color.RGBA {
	c := []color.RGBA{Blue, Orange, Green, Purple, Brown, Pink, Olive, Cyan, Red}
	return c[i%len(c)]
}

// Hex is a colour as #rrggbb.
func Hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// Ticks are round steps over [lo, hi]: a step of 1, 2, 2.5 or 5 times a
// power of ten giving about n intervals, the range widened to whole steps.
func Ticks(lo, hi float64, n int) (start, end, step float64) {
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return 0, 1, 0.2
	}
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo {
		d := math.Max(1, math.Abs(lo)*0.1)
		lo, hi = lo-d, hi+d
	}
	raw := (hi - lo) / float64(max(n, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	start = math.Floor(lo/step+1e-9) * step
	end = math.Ceil(hi/step-1e-9) * step
	return clean(start, step), clean(end, step), step
}

// clean removes binary noise from a multiple of step (11.700000000000001).
func clean(v, step float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', decimals(step), 64), 64)
	return f
}

// decimals is how many decimals a tick step needs.
func decimals(step float64) int {
	if step <= 0 || math.IsNaN(step) || math.IsInf(step, 0) {
		return 0
	}
	return max(0, int(math.Ceil(-math.Log10(step)-1e-9))+frac(step))
}

// frac is 1 for steps like 2.5 or 0.25 that need one more decimal.
func frac(step float64) int {
	m := step / math.Pow(10, math.Floor(math.Log10(step)))
	if math.Abs(m-math.Round(m)) > 1e-9 {
		return 1
	}
	return 0
}

// TickLabel formats v for an axis ticked every step.
func TickLabel(v, step float64) string {
	s := strconv.FormatFloat(v, 'f', decimals(step), 64)
	if s == "-0" {
		return "0"
	}
	return s
}

// extent is the data range of a panel's axis (x or y), rules and zero
// included as asked; ok is false when there is no data.
func extent(p *Panel, onX bool) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range p.Series {
		for _, q := range s.Points {
			v := q.Y
			if onX {
				v = q.X
			}
			if q.Missing || math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if lo > hi {
		return 0, 1, false
	}
	a := p.Y
	if onX {
		a = p.X
	}
	if a.Zero {
		lo = min(lo, 0)
	}
	return lo, hi, true
}

// stacked is the tallest stack of a bar panel (Bar series sum per
// category when they share a Stack).
func stacked(p *Panel) float64 {
	sum := map[string]map[int]float64{}
	top := 0.0
	for _, s := range p.Series {
		if s.Kind != Bar {
			continue
		}
		key := s.Stack
		if key == "" {
			key = s.Name
		}
		if sum[key] == nil {
			sum[key] = map[int]float64{}
		}
		for _, q := range s.Points {
			sum[key][q.Cat] += math.Max(0, q.Y)
			top = max(top, sum[key][q.Cat])
		}
	}
	return top
}

// layout fixes a panel's value-axis ranges to round ticks and places its
// rules: a bound within 30% of the span outside the data widens the range
// to show it; a farther one is drawn at the edge it lies beyond.
func (p *Panel) layout() (xStep, yStep float64) {
	fix := func(a *Axis, onX bool) float64 {
		if a.Categories != nil {
			return 0
		}
		lo, hi := a.Min, a.Max
		if lo == hi {
			lo, hi, _ = extent(p, onX)
			if stacked(p) > 0 && onX == p.Horizontal {
				lo, hi = 0, stacked(p)
			}
			span := hi - lo
			for _, r := range p.Rules {
				if r.OnX != onX {
					continue
				}
				if r.Value > hi && r.Value <= hi+0.3*span {
					hi = r.Value
				} else if r.Value < lo && r.Value >= lo-0.3*span {
					lo = r.Value
				}
			}
			pad := 0.05 * (hi - lo)
			if !a.Zero || lo != 0 {
				lo -= pad
			}
			hi += pad
			if lo < 0 && allNonNegative(p, onX) {
				lo = 0
			}
		}
		var step float64
		a.Min, a.Max, step = Ticks(lo, hi, 5)
		return step
	}
	xStep, yStep = fix(&p.X, true), fix(&p.Y, false)
	for i := range p.Rules {
		r := &p.Rules[i]
		lo, hi, below, above := p.Y.Min, p.Y.Max, "bottom", "top"
		if r.OnX {
			lo, hi, below, above = p.X.Min, p.X.Max, "left", "right"
		}
		r.at, r.beyond = r.Value, ""
		if r.Value > hi {
			r.at, r.beyond = hi, above
		} else if r.Value < lo {
			r.at, r.beyond = lo, below
		}
	}
	return xStep, yStep
}

func allNonNegative(p *Panel, onX bool) bool {
	for _, s := range p.Series {
		for _, q := range s.Points {
			v := q.Y
			if onX {
				v = q.X
			}
			if v < 0 {
				return false
			}
		}
	}
	return true
}

// RuleLabel is how a rule is named in the legend: with where it lies when
// it is off the chart.
func (r Rule) label() string {
	if r.beyond == "" {
		return r.Name
	}
	return fmt.Sprintf("%s (beyond the %s edge)", r.Name, r.beyond)
}

// Unit is the unit of a throughput or latency metric ("" when it has none
// or is unknown).
func Unit(metric string) string {
	switch {
	case strings.HasPrefix(metric, "request_"):
		return "req/s"
	case strings.HasSuffix(metric, "_throughput"):
		return "tok/s"
	case strings.HasPrefix(metric, "ttft_"), strings.HasPrefix(metric, "tpot_"), strings.HasPrefix(metric, "itl_"), strings.HasPrefix(metric, "e2el_"):
		return "ms"
	}
	return ""
}
