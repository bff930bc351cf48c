package tuner

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// SVGMarkers reads back a front chart written as SVG and returns the centres
// (in SVG coordinates) of its filled circle markers, which the chart draws
// for front members only; vgsvg writes each as
// <path d="M cx+r,cy A r,r 0 1 1 cx-r,cy A ... Z">. It lets a written plot
// be checked against the front it claims to show.
func SVGMarkers(r io.Reader) ([][2]float64, error) {
	paths, err := svgPaths(r)
	if err != nil {
		return nil, err
	}
	var out [][2]float64
	for _, p := range paths {
		d, style := p[0], p[1]
		if !strings.Contains(d, "A") || strings.Contains(style, "fill:none") {
			continue
		}
		var x0, y0, rx, ry float64
		if _, err := fmt.Sscanf(d, "M%g,%gA%g,%g", &x0, &y0, &rx, &ry); err != nil {
			return nil, fmt.Errorf("circle path %q: %w", d, err)
		}
		out = append(out, [2]float64{x0 - rx, y0})
	}
	return out, nil
}

// svgPaths returns the d and style attributes of every path of an SVG
// document, in order.
func svgPaths(r io.Reader) ([][2]string, error) {
	dec := xml.NewDecoder(r)
	var out [][2]string
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("invalid SVG: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = se.Name.Local
		}
		if se.Name.Local != "path" {
			continue
		}
		var d, style string
		for _, a := range se.Attr {
			switch a.Name.Local {
			case "d":
				d = a.Value
			case "style":
				style = a.Value
			}
		}
		out = append(out, [2]string{d, style})
	}
	if root != "svg" {
		return nil, fmt.Errorf("root element %q, want svg", root)
	}
	return out, nil
}
