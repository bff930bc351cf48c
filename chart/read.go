package chart

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Reading a written SVG back, so tests can check a chart against the data
// it claims to show and its legend against its markers.

// svgItem is a path or a text of an SVG, in document order.
type svgItem struct {
	path   bool
	d      string // path data
	fill   string // fill colour ("" for none)
	stroke string
	text   string
	x      float64 // text position
}

var colourRe = regexp.MustCompile(`(fill|stroke):(#[0-9A-Fa-f]{6}|none)`)

func readSVG(r io.Reader) ([]svgItem, error) {
	dec := xml.NewDecoder(r)
	var out []svgItem
	root := ""
	var cur *svgItem
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("invalid SVG: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = t.Name.Local
			}
			if t.Name.Local != "path" && t.Name.Local != "text" {
				continue
			}
			it := svgItem{path: t.Name.Local == "path"}
			for _, a := range t.Attr {
				switch a.Name.Local {
				case "d":
					it.d = a.Value
				case "x":
					it.x, _ = strconv.ParseFloat(a.Value, 64)
				case "style":
					for _, m := range colourRe.FindAllStringSubmatch(a.Value, -1) {
						v := strings.ToLower(m[2])
						if v == "none" {
							v = ""
						}
						if m[1] == "fill" {
							it.fill = v
						} else {
							it.stroke = v
						}
					}
					if !strings.Contains(a.Value, "fill:") && !it.path {
						it.fill = "#000000"
					}
				}
			}
			out = append(out, it)
			cur = &out[len(out)-1]
		case xml.CharData:
			if cur != nil && !cur.path {
				cur.text += string(t)
			}
		case xml.EndElement:
			cur = nil
		}
	}
	if root != "svg" {
		return nil, fmt.Errorf("root element %q, want svg", root)
	}
	return out, nil
}

// legendStart is the index of the legend's first item: the legend is
// drawn last, each entry its samples then its text, every text at the
// same x.
func legendStart(items []svgItem) int {
	last := -1
	for i := len(items) - 1; i >= 0; i-- {
		if !items[i].path {
			last = i
			break
		}
	}
	if last < 0 {
		return len(items)
	}
	x, first := items[last].x, last
	for i := last - 1; i >= 0; i-- {
		if items[i].path {
			continue
		}
		if items[i].x != x {
			break
		}
		first = i
	}
	return firstSample(items, first)
}

// firstSample walks back from a legend text over its samples: the paths
// just left of it (a thumbnail is 22 points wide; the panels end further
// left).
func firstSample(items []svgItem, text int) int {
	i := text
	for i > 0 && items[i-1].path && pathX(items[i-1].d) >= items[text].x-28 {
		i--
	}
	return i
}

// pathX is the x of a path's first point.
func pathX(d string) float64 {
	var x, y float64
	if _, err := fmt.Sscanf(d, "M%g,%g", &x, &y); err != nil {
		return 0
	}
	return x
}

// SVGMarkers returns the centres (SVG coordinates, y up as in the paths)
// of the filled circles of a chart written by Write, legend samples left
// out: front members, curve levels, history runs.
func SVGMarkers(r io.Reader) ([][2]float64, error) {
	items, err := readSVG(r)
	if err != nil {
		return nil, err
	}
	var out [][2]float64
	for _, it := range items[:legendStart(items)] {
		if !it.path || it.fill == "" || !strings.Contains(it.d, "A") {
			continue
		}
		var x0, y0, rx, ry float64
		if _, err := fmt.Sscanf(it.d, "M%g,%gA%g,%g", &x0, &y0, &rx, &ry); err != nil {
			return nil, fmt.Errorf("circle path %q: %w", it.d, err)
		}
		out = append(out, [2]float64{x0 - rx, y0})
	}
	return out, nil
}

// LegendEntry is one legend line as drawn: its text and the colours of
// its samples (fill or stroke, lower-case #rrggbb).
type LegendEntry struct {
	Name    string
	Colours []string
}

// SVGLegend reads the legend of a chart written by Write.
func SVGLegend(r io.Reader) ([]LegendEntry, error) {
	items, err := readSVG(r)
	if err != nil {
		return nil, err
	}
	var out []LegendEntry
	var cols []string
	for _, it := range items[legendStart(items):] {
		if it.path {
			if c := it.fill + it.stroke; c != "" {
				cols = append(cols, c)
			}
			continue
		}
		out = append(out, LegendEntry{Name: it.text, Colours: cols})
		cols = nil
	}
	return out, nil
}
