package chart

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"
)

// A parallel-coordinates chart's rows fall in three legend groups, each
// one colour, so that the legend matches every line: the best quarter by
// the colour value, the other measured rows, and rows without a value
// (failed or infeasible).
type rowGroup struct {
	name   string
	colour color.RGBA
	rows   []Row
}

func (pc *Parallel) groups() []rowGroup {
	var vals []float64
	for _, r := range pc.Rows {
		if !math.IsNaN(r.Colour) {
			vals = append(vals, r.Colour)
		}
	}
	slices.Sort(vals)
	cut := math.Inf(1)
	if len(vals) > 0 {
		cut = vals[len(vals)*3/4]
	}
	gs := []rowGroup{
		{name: "best quarter by " + pc.ColourName, colour: Blue},
		{name: "other measured", colour: LightBlue},
		{name: "failed or infeasible", colour: Grey},
	}
	for _, r := range pc.Rows {
		switch {
		case math.IsNaN(r.Colour):
			gs[2].rows = append(gs[2].rows, r)
		case r.Colour >= cut:
			gs[0].rows = append(gs[0].rows, r)
		default:
			gs[1].rows = append(gs[1].rows, r)
		}
	}
	return slices.DeleteFunc(gs, func(g rowGroup) bool { return len(g.rows) == 0 })
}

// panel draws the chart for SVG/PNG: each dimension a category on x with
// its range in the label, each row a line over the values scaled to 0..1.
func (pc *Parallel) panel() Panel {
	n := len(pc.Dims)
	lo, hi := make([]float64, n), make([]float64, n)
	names := make([]string, n)
	for j, d := range pc.Dims {
		lo[j], hi[j] = math.Inf(1), math.Inf(-1)
		for _, r := range pc.Rows {
			if j < len(r.Values) && !math.IsNaN(r.Values[j]) {
				lo[j], hi[j] = min(lo[j], r.Values[j]), max(hi[j], r.Values[j])
			}
		}
		if d.Categories != nil {
			lo[j], hi[j] = 0, float64(len(d.Categories)-1)
			names[j] = d.Name + "\n" + strings.Join(d.Categories, "|")
		} else {
			names[j] = fmt.Sprintf("%s\n%.4g–%.4g", d.Name, lo[j], hi[j])
		}
	}
	p := Panel{X: Axis{Categories: names}, Y: Axis{Name: "scaled to each axis' range", Min: 0, Max: 1}}
	for _, g := range pc.groups() {
		for i, r := range g.rows {
			s := Series{Name: g.name, Kind: Line, Colour: g.colour, Width: 1, NoLegend: i > 0}
			for j := range pc.Dims {
				y := 0.5
				if hi[j] > lo[j] && j < len(r.Values) {
					y = (r.Values[j] - lo[j]) / (hi[j] - lo[j])
				}
				s.Points = append(s.Points, Point{X: float64(j), Y: y})
			}
			p.Series = append(p.Series, s)
		}
	}
	return p
}
