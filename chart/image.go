package chart

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Write draws the figure as "svg" or "png" with gonum.org/v1/plot: panels
// stacked with their data areas aligned, the legend to the right of them
// (never over the data), ticks on round steps.
func Write(w io.Writer, f Figure, format string) error {
	if err := f.check(); err != nil {
		return err
	}
	width, height := f.size()
	var cv draw.Canvas
	var out io.WriterTo
	switch format {
	case "svg":
		s := vgsvg.New(width, height)
		cv, out = draw.New(s), s
	case "png":
		img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110))
		cv, out = draw.New(img), vgimg.PngCanvas{Canvas: img}
	default:
		return fmt.Errorf("chart: format %q (want svg, png or html)", format)
	}
	cv.SetColor(color.White)
	cv.Fill(cv.Rectangle.Path())
	if _, _, err := f.draw(cv); err != nil {
		return err
	}
	_, err := out.WriteTo(w)
	return err
}

// size is the drawing's size: 7 by 4.5 inches, 2.25 more per extra panel.
func (f *Figure) size() (vg.Length, vg.Length) {
	width, height := vg.Points(f.Width), vg.Points(f.Height)
	if width == 0 {
		width = 7 * vg.Inch
	}
	if height == 0 {
		height = 4.5 * vg.Inch
		if len(f.Panels) > 1 {
			height += vg.Length(len(f.Panels)-1) * 2.25 * vg.Inch
		}
	}
	return width, height
}

// Pixel is where the data point (x, y) of a panel lands in the SVG that
// Write makes, in points with y up (the coordinates of its paths).
func Pixel(f Figure, panel int, x, y float64) (float64, float64, error) {
	w, h := f.size()
	cv := draw.New(vgsvg.New(w, h))
	plots, cells, err := f.draw(cv)
	if err != nil {
		return 0, 0, err
	}
	if panel >= len(plots) {
		return 0, 0, fmt.Errorf("chart: no panel %d", panel)
	}
	dc := plots[panel].DataCanvas(cells[panel])
	fx, fy := plots[panel].Transforms(&dc)
	return float64(fx(x).Points()), float64(fy(y).Points()), nil
}

// check refuses a figure with nothing to draw.
func (f *Figure) check() error {
	if f.Parallel != nil {
		if len(f.Parallel.Rows) == 0 || len(f.Parallel.Dims) == 0 {
			return fmt.Errorf("%s: nothing to plot", f.what())
		}
		return nil
	}
	for _, p := range f.Panels {
		for _, s := range p.Series {
			for _, q := range s.Points {
				if !q.Missing {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("%s: nothing to plot", f.what())
}

func (f *Figure) what() string {
	if f.Page != "" {
		return f.Page
	}
	return "chart"
}

// draw lays the figure out on c, title on top and legend on the right,
// and returns its plots and their canvases.
func (f *Figure) draw(c draw.Canvas) ([]*plot.Plot, []draw.Canvas, error) {
	if f.Parallel != nil {
		p := f.Parallel.panel()
		g := *f
		g.Panels, g.Parallel = []Panel{p}, nil
		return g.draw(c)
	}
	f.ownPanels()
	plots := make([][]*plot.Plot, len(f.Panels))
	legend := plot.NewLegend()
	legend.Left = true
	legend.Top = true
	legend.ThumbnailWidth = vg.Points(22)
	legend.TextStyle.Font.Size = vg.Points(9)
	legend.Padding = vg.Points(3)
	for i := range f.Panels {
		pl, err := f.Panels[i].plot(&legend)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f.what(), err)
		}
		plots[i] = []*plot.Plot{pl}
	}
	title := plot.New().Title.TextStyle
	top := c.Max.Y
	for _, line := range []struct {
		text string
		size vg.Length
	}{{f.Title, 12}, {f.Subtitle, 9}} {
		if line.text == "" {
			continue
		}
		st := title
		st.Font.Size = line.size
		c.FillText(st, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: top - 4}, line.text)
		top -= st.Height(line.text) + 4
	}
	lw := legendWidth(legend, f.Panels)
	area := draw.Crop(c, 0, -lw, 0, top-c.Max.Y-4)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Points(10)}
	cells := plot.Align(plots, tiles, area)
	var out []*plot.Plot
	var canvases []draw.Canvas
	for i := range plots {
		plots[i][0].Draw(cells[i][0])
		out, canvases = append(out, plots[i][0]), append(canvases, cells[i][0])
	}
	lc := draw.Crop(c, c.Max.X-c.Min.X-lw+vg.Points(8), 0, 0, top-c.Max.Y-vg.Points(12))
	legend.Draw(lc)
	return out, canvases, nil
}

// ownPanels gives f its own copy of the panels and their rules, which
// layout fixes in place. Figure is passed by value but its slices are
// shared: without the copy, drawing a figure twice (SVG then HTML, or Pixel
// beside Write) laid the second drawing out from the first one's rounded
// range instead of the data, and could tick it differently.
func (f *Figure) ownPanels() {
	f.Panels = slices.Clone(f.Panels)
	for i := range f.Panels {
		f.Panels[i].Rules = slices.Clone(f.Panels[i].Rules)
	}
}

// legendWidth is the room the legend takes right of the panels.
func legendWidth(l plot.Legend, panels []Panel) vg.Length {
	w := vg.Length(0)
	for _, p := range panels {
		for _, s := range p.Series {
			if !s.NoLegend {
				w = max(w, l.TextStyle.Width(s.Name))
			}
		}
		for _, r := range p.Rules {
			w = max(w, l.TextStyle.Width(r.label()))
		}
	}
	if w == 0 {
		return 0
	}
	return w + l.ThumbnailWidth + vg.Points(20)
}

// plot builds the gonum plot of a panel, adding its entries to legend.
func (p *Panel) plot(legend *plot.Legend) (*plot.Plot, error) {
	xStep, yStep := p.layout()
	pl := plot.New()
	pl.X.Label.Text, pl.Y.Label.Text = p.X.Label(), p.Y.Label()
	for _, a := range []*plot.Axis{&pl.X, &pl.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(10)
		a.Tick.Label.Font.Size = vg.Points(9)
	}
	pl.Add(plotter.NewGrid())
	var bars []*plotter.BarChart
	stacks := map[string]*plotter.BarChart{}
	nBar := 0
	for _, s := range p.Series {
		if s.Kind == Bar {
			nBar++
		}
	}
	labels := placeLabels(p, 360, 220)
	for si, s := range p.Series {
		var thumbs []plot.Thumbnailer
		switch s.Kind {
		case Bar:
			cats := len(p.X.Categories)
			if p.Horizontal {
				cats = len(p.Y.Categories)
			}
			vals := make(plotter.Values, cats)
			for _, q := range s.Points {
				if q.Cat < cats {
					vals[q.Cat] = math.Max(0, q.Y)
				}
			}
			width := vg.Points(math.Min(36, 280/float64(max(cats, 1))))
			if s.Stack == "" && nBar > 1 {
				width /= vg.Length(nBar)
			}
			bc, err := plotter.NewBarChart(vals, width)
			if err != nil {
				return nil, err
			}
			bc.Color, bc.LineStyle.Width, bc.Horizontal = s.Colour, 0, p.Horizontal
			if s.Stack != "" {
				if below := stacks[s.Stack]; below != nil {
					bc.StackOn(below)
				}
				stacks[s.Stack] = bc
			} else if nBar > 1 {
				bc.Offset = vg.Length(len(bars)-nBar/2) * width
			}
			bars = append(bars, bc)
			pl.Add(bc)
			thumbs = append(thumbs, bc)
		default:
			for _, run := range runs(s.Points) {
				pts := make(plotter.XYs, len(run))
				for i, q := range run {
					pts[i] = plotter.XY{X: q.X, Y: q.Y}
				}
				if s.Kind == Line || s.Kind == Step {
					l, err := plotter.NewLine(pts)
					if err != nil {
						return nil, err
					}
					l.LineStyle = lineStyle(s)
					if s.Kind == Step {
						l.StepStyle = plotter.PostStep
					}
					pl.Add(l)
					if len(thumbs) == 0 {
						thumbs = append(thumbs, l)
					}
				}
				if s.Marker.Shape != NoMarker {
					sc, err := plotter.NewScatter(pts)
					if err != nil {
						return nil, err
					}
					sc.GlyphStyle = glyph(s)
					pl.Add(sc)
					if len(thumbs) < 2 {
						thumbs = append(thumbs, sc)
					}
				}
			}
			if err := addLabels(pl, p, si, labels); err != nil {
				return nil, err
			}
		}
		if !s.NoLegend && len(thumbs) > 0 {
			legend.Add(s.Name, thumbs...)
		}
	}
	if len(p.X.Categories) > 0 {
		pl.NominalX(p.X.Categories...)
		if len(p.X.Categories) > 6 {
			pl.X.Tick.Label.Rotation = math.Pi / 5
			pl.X.Tick.Label.XAlign, pl.X.Tick.Label.YAlign = draw.XRight, draw.YTop
		}
	}
	if len(p.Y.Categories) > 0 {
		pl.NominalY(p.Y.Categories...)
	}
	for _, a := range []struct {
		ax   *plot.Axis
		spec Axis
		step float64
	}{{&pl.X, p.X, xStep}, {&pl.Y, p.Y, yStep}} {
		if a.spec.Categories != nil {
			continue
		}
		a.ax.Min, a.ax.Max = a.spec.Min, a.spec.Max
		step := a.step
		a.ax.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
			var ts []plot.Tick
			for i := 0; ; i++ {
				v := clean(lo+float64(i)*step, step)
				if v > hi+step*1e-6 || i > 100 {
					break
				}
				ts = append(ts, plot.Tick{Value: v, Label: TickLabel(v, step)})
			}
			return ts
		})
	}
	for _, r := range p.Rules {
		if err := addRule(pl, p, r, legend); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// runs splits points at the missing ones.
func runs(pts []Point) [][]Point {
	var out [][]Point
	var cur []Point
	for _, q := range pts {
		if q.Missing {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, q)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func lineStyle(s Series) draw.LineStyle {
	w := s.Width
	if w == 0 {
		w = 1.5
	}
	ls := draw.LineStyle{Color: s.Colour, Width: vg.Points(w)}
	if s.Dashed {
		ls.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	return ls
}

// glyph is a series' marker as gonum draws it (Size is a diameter).
func glyph(s Series) draw.GlyphStyle {
	size := s.Marker.Size
	if size == 0 {
		size = 7
	}
	g := draw.GlyphStyle{Color: s.Colour, Radius: vg.Points(size / 2)}
	switch s.Marker.Shape {
	case Ring:
		g.Shape = ringGlyph{}
	case Square:
		g.Shape = draw.BoxGlyph{}
	case Diamond:
		g.Shape = diamondGlyph{}
	case Triangle:
		g.Shape = draw.PyramidGlyph{}
	case Cross:
		g.Shape = draw.CrossGlyph{}
	default:
		g.Shape = draw.CircleGlyph{}
	}
	return g
}

// ringGlyph is a hollow circle with a visible stroke (gonum's is 0.5 pt).
type ringGlyph struct{}

func (ringGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: vg.Points(1.2)})
	var p vg.Path
	p.Move(vg.Point{X: pt.X + sty.Radius, Y: pt.Y})
	p.Arc(pt, sty.Radius, 0, 2*math.Pi)
	p.Close()
	c.Stroke(p)
}

// diamondGlyph is a filled square turned 45 degrees.
type diamondGlyph struct{}

func (diamondGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetColor(sty.Color)
	r := sty.Radius * 1.3
	var p vg.Path
	p.Move(vg.Point{X: pt.X, Y: pt.Y + r})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y})
	p.Line(vg.Point{X: pt.X, Y: pt.Y - r})
	p.Line(vg.Point{X: pt.X - r, Y: pt.Y})
	p.Close()
	c.Fill(p)
}

// addLabels writes the labels of series si beside their markers, on the
// sides placeLabels chose.
func addLabels(pl *plot.Plot, p *Panel, si int, sides map[[2]int]Side) error {
	s := p.Series[si]
	off := vg.Points(s.Marker.Size/2 + 3)
	for pi, q := range s.Points {
		side, ok := sides[[2]int{si, pi}]
		if !ok || side == Hidden {
			continue
		}
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: q.X, Y: q.Y}}, Labels: []string{q.Label}})
		if err != nil {
			return err
		}
		st := &l.TextStyle[0]
		st.Font.Size = vg.Points(8)
		st.Color = color.RGBA{R: 60, G: 60, B: 60, A: 255}
		st.YAlign = draw.YCenter
		switch side {
		case Right:
			l.Offset = vg.Point{X: off}
		case Left:
			st.XAlign = draw.XRight
			l.Offset = vg.Point{X: -off}
		case Above:
			st.XAlign, st.YAlign = draw.XCenter, draw.YBottom
			l.Offset = vg.Point{Y: off}
		case Below:
			st.XAlign, st.YAlign = draw.XCenter, draw.YTop
			l.Offset = vg.Point{Y: -off}
		}
		pl.Add(l)
	}
	return nil
}

// addRule draws a bound: a red dashed line, at the edge with an arrow and
// its value when it lies beyond the axis.
func addRule(pl *plot.Plot, p *Panel, r Rule, legend *plot.Legend) error {
	pts := plotter.XYs{{X: p.X.Min, Y: r.at}, {X: p.X.Max, Y: r.at}}
	if r.OnX {
		pts = plotter.XYs{{X: r.at, Y: p.Y.Min}, {X: r.at, Y: p.Y.Max}}
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	col := r.Colour
	if col == (color.RGBA{}) {
		col = Red
	}
	l.LineStyle = draw.LineStyle{Color: col, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}}
	pl.Add(l)
	legend.Add(r.label(), l)
	if r.beyond == "" {
		return nil
	}
	// The arrow: a triangle on the edge, pointing out, and the value.
	mid := plotter.XY{X: (p.X.Min + p.X.Max) / 2, Y: r.at}
	if r.OnX {
		mid = plotter.XY{X: r.at, Y: (p.Y.Min + p.Y.Max) / 2}
	}
	sc, err := plotter.NewScatter(plotter.XYs{mid})
	if err != nil {
		return err
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(5), Shape: arrowGlyph{dir: r.beyond}}
	pl.Add(sc)
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{mid}, Labels: []string{fmt.Sprintf("%g %s", r.Value, arrowText[r.beyond])}})
	if err != nil {
		return err
	}
	st := &lb.TextStyle[0]
	st.Font.Size, st.Color = vg.Points(8), col
	switch r.beyond {
	case "right":
		st.XAlign, lb.Offset = draw.XRight, vg.Point{X: -vg.Points(9)}
	case "left":
		lb.Offset = vg.Point{X: vg.Points(9)}
	case "top":
		st.YAlign, lb.Offset = draw.YTop, vg.Point{Y: -vg.Points(9)}
	default:
		lb.Offset = vg.Point{Y: vg.Points(9)}
	}
	pl.Add(lb)
	return nil
}

var arrowText = map[string]string{"right": "→", "left": "←", "top": "↑", "bottom": "↓"}

// arrowGlyph is a filled triangle pointing towards dir.
type arrowGlyph struct{ dir string }

func (a arrowGlyph) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetColor(sty.Color)
	r := sty.Radius
	tip, b1, b2 := vg.Point{X: r}, vg.Point{X: -r, Y: r}, vg.Point{X: -r, Y: -r}
	rot := map[string]func(vg.Point) vg.Point{
		"right":  func(p vg.Point) vg.Point { return p },
		"left":   func(p vg.Point) vg.Point { return vg.Point{X: -p.X, Y: p.Y} },
		"top":    func(p vg.Point) vg.Point { return vg.Point{X: p.Y, Y: p.X} },
		"bottom": func(p vg.Point) vg.Point { return vg.Point{X: p.Y, Y: -p.X} },
	}[a.dir]
	var p vg.Path
	p.Move(pt.Add(rot(tip)))
	p.Line(pt.Add(rot(b1)))
	p.Line(pt.Add(rot(b2)))
	p.Close()
	c.Fill(p)
}
